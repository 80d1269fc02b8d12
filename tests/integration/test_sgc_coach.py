"""A 5-turn coach session through ``sgc_full`` on the embedded app with the real model.

Whatever the 135M model writes: narration streams to the client before the
reply, and Φ's tool dispatch happens while the 4-in-1 stream is still running
(when Φ hits); the delivered text never names a creature the user does not own;
W3 never issues the same guidance subject in consecutive turns; each turn's
answer.meta is stored with the turn and replays byte for byte.
"""

from __future__ import annotations

import httpx
import pytest

from tests.integration.conftest import start_app, wait_for

pytestmark = pytest.mark.integration

USER = "u001"
TEXTS = [
    "Who should I use against my next opponent?",
    "Can you teach me about type matchups?",
    "Should I swap out one member of my lineup?",
    "Tell me about my strongest creature's skills.",
    "Any other advice for this battle?",
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("coach")
    overrides = {
        # A generous deadline: the assertions are about behaviour, and a shared 2-core box can
        # decode at a few tokens per second (a first turn past 60 s was seen).
        "pipeline": {"kind": "sgc_full", "max_reply_tokens": 64, "turn_deadline_s": 300},
        "domain": {"name": "coach", "seed": 7},
    }
    yield from start_app(tmp, overrides)


@pytest.fixture(scope="module")
def session(app) -> list[list[dict]]:
    return [app.turn("coach-1", text, user_id=USER) for text in TEXTS]


def log_for(app, turn_id: str) -> list[dict]:
    return app.events(turn_id)


def test_narration_streams_before_the_reply_and_dispatch_precedes_stream_end(app, session):
    outcomes = []
    for events in session:
        kinds = [e["type"] for e in events]
        assert "narration.delta" in kinds, kinds
        first_reply = kinds.index("reply.delta") if "reply.delta" in kinds else len(kinds)
        assert kinds.index("narration.delta") < first_reply
        log = log_for(app, events[-1]["turn_id"])
        phi = [e for e in log if e["kind"] == "sgc.phi"]
        assert len(phi) == 1  # Φ fires exactly once per turn
        outcomes.append((phi[0]["intent"], phi[0]["sub_intent"], phi[0]["outcome"]))
        if phi[0]["outcome"] != "hit":
            continue
        # a hit dispatches Φ's tools mid-stream: before the stream is parsed whole, inside its time
        order = [e["kind"] for e in log]
        assert "sgc.dispatch" in order and "sgc.w1.parsed" in order, order
        assert order.index("sgc.dispatch") < order.index("sgc.w1.parsed")
        dispatch = log[order.index("sgc.dispatch")]
        assert dispatch["source"] == "phi" and dispatch["tools"] == phi[0]["tools"]
        stages = events[-1]["timings"]["stages"]
        assert stages["dispatch_at"] <= stages["w1_stream"], stages
    # the claim above must have been exercised: the session's texts lead the model to Φ rows
    assert any(o == "hit" for _, _, o in outcomes), outcomes
    assert events[-1]["rules_version"]


def test_no_unowned_creature_is_delivered(app, session):
    from pipelines.domains.coach import generate_coach_world

    world = generate_coach_world(7)
    owned = {c.species for c in world.users[USER].creatures}
    unowned = {s for s in world.species} - owned
    for events in session:
        reply = "".join(e["text"] for e in events if e["type"] in ("reply.delta", "narration.delta"))
        named = {s for s in unowned if s.lower() in reply.lower()}
        assert not named, (named, reply)


def test_w3_metas_stored_no_consecutive_repeat_and_replay(app, session):
    from pipelines.core.replay import all_identical, replay_w3
    from pipelines.domains.coach import BRANCH_OF_INTENT, load_coach_rule_tables

    turns = httpx.get(f"{app.http}/v1/sessions/coach-1").json()["turns"]
    assert len(turns) == len(TEXTS)
    metas = [t["meta"].get("w3") for t in turns]
    assert all(m is not None for m in metas)
    for a, b in zip(metas, metas[1:], strict=False):
        assert a["guidance_type"] == "none" or b["guidance_type"] == "none" or a["subject_id"] != b["subject_id"]
    results = replay_w3([t["meta"] for t in turns], tables=load_coach_rule_tables(), session_id="coach-1",
                        branch_of_intent=BRANCH_OF_INTENT)
    assert len(results) == len(TEXTS)
    assert all_identical(results), results


def test_tandem_replay_shows_w3_byte_identical(app, session, capsys):
    from serve.replay import main as replay_main

    rc = replay_main(["coach-1", "--config", str(app.config_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"{len(TEXTS)}/{len(TEXTS)} decisions identical" in out


def test_rule_tables_reload_live_via_user_config(app, session):
    """RuleKernels tables travel as user_config: a new version applies in place; a malformed
    bundle is refused by our loader and, if pushed anyway, by the replica (old tables stay)."""

    from ray import serve

    from pipelines.domains.coach import coach_rule_tables_dict
    from serve.config import ServeFile

    h = serve.get_deployment_handle("RuleKernels", app_name=app.app_name)
    before = h.info.remote().result()
    rules = coach_rule_tables_dict()
    new = {**rules, "version": "coach-test-2"}
    app.redeploy([{"name": "RuleKernels", "user_config": {"rules": new}}])

    def info() -> dict:
        return h.info.remote().result()

    after = wait_for(info, lambda i: i["version"] != before["version"])
    assert after["pid"] == before["pid"] and "coach-test-2" in after["version"]
    bad = {**new, "phi": {"version": "x", "rows": [{"intent": "nope", "sub_intent": "nope", "tools": []}]}}
    raw = app.serve_file.model_dump(mode="json")
    raw["applications"][0]["deployments"] = [{"name": "RuleKernels", "user_config": {"rules": bad}}]
    with pytest.raises(ValueError, match="deployments"):  # pydantic's ValidationError is a ValueError
        ServeFile.model_validate(raw)
    app.redeploy([{"name": "RuleKernels", "user_config": {"rules": bad}}], validate=False)
    refused = wait_for(info, lambda i: i["last_error"] is not None)
    assert refused["version"] == after["version"] and refused["pid"] == before["pid"]
    # turns keep running on the active tables, and say which
    done = app.turn("coach-2", "Hi coach!", user_id=USER)[-1]
    assert "coach-test-2" in (done["rules_version"] or "")
