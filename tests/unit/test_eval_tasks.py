"""A whole tau2 task played by ``Evaluator.run_task`` against a fake app (a test double of the public routes): the
instructed user, the oracle labels each request carries, and the per-task measures (first card, read-back,
re-offered after a no). The task and its database are written for this test."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from serve.eval.evaluate import Evaluator
from serve.eval.runner import EventLog
from serve.eval.suites import Case, EvalTurn

WANT = {"order_id": "#W7000001", "item_ids": ["K1"], "new_item_ids": ["K2"], "payment_method_id": "paypal_2"}
DB = {
    "users": {"nadia_okafor_1": {"user_id": "nadia_okafor_1", "payment_methods": {"paypal_2": {"source": "paypal"}}}},
    "orders": {"#W7000001": {"order_id": "#W7000001", "user_id": "nadia_okafor_1", "status": "delivered", "items": [
        {"name": "Electric Kettle", "product_id": "PK", "item_id": "K1", "options": {"capacity": "1L"}}]}},
    "products": {"PK": {"name": "Electric Kettle", "variants": {"K1": {"options": {"capacity": "1L"}},
                                                                 "K2": {"options": {"capacity": "2L"}}}}},
}
TASK = {"id": "x9", "user_scenario": {"instructions": {
    "reason_for_call": "You want to swap the kettle you got for the 2L one. You pay any difference with PayPal.",
    "known_info": "You are Nadia Okafor, zip code 60614.", "unknown_info": "", "task_instructions": ""}},
    "evaluation_criteria": {"actions": [{"name": "exchange_delivered_order_items", "arguments": WANT}]}}
WRONG = {**WANT, "new_item_ids": ["K9"]}
# what the fake app answers, turn by turn (the user's replies follow from its rules)
REPLIES = [
    [{"type": "clarify", "question": "Could you share your email, or your name and zip code?", "options": []}],
    [{"type": "action_card", "card_id": "card.exchange_items", "title": "Exchange items", "params": WRONG},
     {"type": "reply.delta", "text": "I can exchange the Electric Kettle of order #W7000001."}],  # no new option said
    [{"type": "clarify", "question": "What should I change about it?", "options": []}],
    [{"type": "action_card", "card_id": "card.exchange_items", "title": "Exchange items", "params": WRONG},
     {"type": "reply.delta", "text": "I can exchange the Electric Kettle of order #W7000001 for the 2L one, "
                                     "with your PayPal account."}],
    [{"type": "action_card", "card_id": "card.exchange_items", "title": "Exchange items", "params": WANT},
     {"type": "reply.delta", "text": "I can exchange the Electric Kettle of order #W7000001 for 2L, PayPal."}],
    [{"type": "reply.delta", "text": "Done."}],
]


class App(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        data = json.dumps({"turns": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append(body)
        events = REPLIES[min(len(self.received) - 1, len(REPLIES) - 1)]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for ev in [*events, {"type": "done", "turn_id": f"t{len(self.received)}", "status": "ok", "timings": {}}]:
            self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())


@pytest.fixture
def app(tmp_path: Path):
    handler = type("H", (App,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (tmp_path / "tasks_train.json").write_text(json.dumps([TASK]))
    (tmp_path / "db.json").write_text(json.dumps(DB))
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.received
    server.shutdown()
    server.server_close()


def test_a_task_carries_the_oracle_labels_and_its_measures(app, tmp_path):
    url, received = app
    ev = Evaluator("tandem", "support", url, EventLog(None), perception="oracle", max_user_turns=12)
    case = Case("tau2-tasks", "task-x9", (EvalTurn("-"),),
                info={"task_id": "x9", "tau2_dir": str(tmp_path), "half": "studied"})
    try:
        rows = ev.run_task(case)
    finally:
        ev.close()
    record = rows[-1]["tau2_task"]
    # every request carried the labels of the request the user pursued: the exchange, then none left
    assert [r.get("perception") for r in received] == [{"intent": "exchange", "sub_intent": "items"}] * 5 + [
        {"intent": "order_status", "sub_intent": "status"}]
    assert received[1]["text"] == "I'm Nadia Okafor, zip code 60614."
    assert (record["user"], record["perception"], record["half"]) == ("instructed", "oracle", "studied")
    assert (record["actions_matched"], record["cards_refused"], record["reoffered_after_no"]) == (1, 2, 1)
    assert record["first_card_ok"] is False and record["cards_shown"] == 3
    assert record["readback_missing"] == 1  # the first card did not name the payment method
    assert rows[1]["readback_missing"] == [{"card_id": "card.exchange_items",
                                            "missing": {"payment_method_id": ["PayPal"]}}]
    assert rows[3]["readback_missing"] == [] and rows[4]["readback_missing"] == []
    assert record["ended"] == "done" and record["passed"] is None  # no world to check against here
