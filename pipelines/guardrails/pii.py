"""PII detection and redaction with a vault: models and logs see ``[EMAIL_1]``, tools get the value.

Six kinds are detected deterministically: ``EMAIL``; ``IBAN`` (country code,
check digits, 11–30 characters, the ISO 13616 mod-97 checksum); ``CARD``
(13–19 digits passing the Luhn check); ``SSN`` (US social security numbers
written ``123-45-6789`` / ``123 45 6789``, or nine digits after "SSN");
``PHONE`` (numbers of any region that ``phonenumbers`` finds valid, written
with a leading ``+`` or with separators, so bare 10-digit item ids are not
phones) and ``ADDRESS`` (a street number, one to three words and a street
suffix; a second line right after it — suite, apartment, unit — is a value of its own). :meth:`Vault.redact` replaces each value by
a placeholder numbered per kind in order of first appearance (the same value
always gets the same placeholder), so re-redacting a session's texts in order
rebuilds the same vault on every turn without storing the values anywhere.
:meth:`Vault.resolve` puts values back into a model-produced tool argument
just before the tool runs; :meth:`Vault.restore` does the same for the text
released to the user.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PII_KINDS",
    "PII_FIELDS",
    "PLACEHOLDER_RE",
    "PiiMatch",
    "detect_pii",
    "Vault",
    "luhn_ok",
    "iban_ok",
    "mask_pii_fields",
]

PII_KINDS: tuple[str, ...] = ("EMAIL", "IBAN", "CARD", "SSN", "PHONE", "ADDRESS")
PLACEHOLDER_RE = re.compile(r"\[(EMAIL|IBAN|CARD|SSN|PHONE|ADDRESS)_(\d+)\]")
# Structured fields that hold personal data whatever their value looks like (names, city, zip, card digits).
PII_FIELDS: frozenset[str] = frozenset(
    {"first_name", "last_name", "address1", "address2", "city", "zip", "last_four", "email"}
)

_STREET = (
    r"(?:street|st|avenue|ave|road|rd|lane|ln|drive|dr|boulevard|blvd|way|court|ct|place|pl"
    r"|terrace|parkway|pkwy|highway|hwy|circle|square|sq)"
)
_PATTERNS: dict[str, re.Pattern[str]] = {
    "EMAIL": re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    "CARD": re.compile(r"(?<![\w#])(?:\d[ -]?){12,18}\d(?!\w)"),
    "IBAN": re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"),
    "SSN": re.compile(
        r"(?<![\w#])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\w])"
        r"|(?<=\bssn)[\s:#]{0,3}(?!000|666|9\d\d)\d{9}(?!\w)",
        re.IGNORECASE,
    ),
    "ADDRESS": re.compile(rf"\b\d{{1,6}}\s+(?:[A-Za-z0-9'.-]+\s+){{0,3}}{_STREET}\b\.?", re.IGNORECASE),
}
#: An address's second line right after its street line ("…Drive, Suite 394", "…Street Apt 5"): a value of its own.
_UNIT = re.compile(r"\s*,?\s*((?:apt|apartment|suite|ste|unit|floor|fl|#)\.?\s*#?\s*[\w-]*\d[\w-]*)\b", re.IGNORECASE)


_PHONE_SEPARATOR = re.compile(r"[\s().-]")


def _phones(text: str) -> Iterator[tuple[int, int]]:
    """Spans of valid phone numbers of any region (``+``-prefixed) or US numbers written with separators."""
    import phonenumbers  # a declared dependency; imported here so importing this module stays light

    for m in phonenumbers.PhoneNumberMatcher(text, "US", leniency=phonenumbers.Leniency.VALID):
        raw = m.raw_string
        if raw.startswith("+") or _PHONE_SEPARATOR.search(raw):
            yield m.start, m.end


def iban_ok(iban: str) -> bool:
    """The ISO 13616 check of an IBAN (spaces ignored): 15–34 characters, mod 97 equals 1."""
    s = iban.replace(" ", "").upper()
    if not 15 <= len(s) <= 34 or not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]+", s):
        return False
    digits = "".join(str(int(c, 36)) for c in s[4:] + s[:4])
    return int(digits) % 97 == 1


def _ibans(text: str) -> Iterator[tuple[int, int]]:
    """IBAN spans; a candidate is shortened group by group until its checksum holds (or it is dropped)."""
    for m in _PATTERNS["IBAN"].finditer(text):
        value = m.group(0)
        while len(value.replace(" ", "")) >= 15:
            if iban_ok(value):
                yield m.start(), m.start() + len(value)
                break
            cut = value.rfind(" ")
            value = value[:cut] if cut > 0 else value[:-1]


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a digit string (what every payment card number passes)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


@dataclass(frozen=True)
class PiiMatch:
    kind: str
    start: int
    end: int
    value: str


def detect_pii(text: str, kinds: Iterable[str] = PII_KINDS) -> list[PiiMatch]:
    """Non-overlapping PII spans in ``text``, in order (earlier kinds in :data:`PII_KINDS` win)."""
    found: list[PiiMatch] = []
    taken: list[tuple[int, int]] = []
    kinds = set(kinds)
    for kind in PII_KINDS:
        if kind not in kinds:
            continue
        for start, end in _spans(kind, text):
            raw = text[start:end]
            value = raw.lstrip(" :#")
            start += len(raw) - len(value)
            value = value.rstrip(" .")
            end = start + len(value)
            if kind == "CARD":
                digits = re.sub(r"\D", "", value)
                if not 13 <= len(digits) <= 19 or not luhn_ok(digits):
                    continue
            if not value or any(s < end and start < e for s, e in taken):
                continue
            taken.append((start, end))
            found.append(PiiMatch(kind, start, end, value))
    return sorted(found, key=lambda p: p.start)


def _spans(kind: str, text: str) -> Iterator[tuple[int, int]]:
    if kind == "PHONE":
        return _phones(text)
    if kind == "IBAN":
        return _ibans(text)
    if kind == "ADDRESS":
        return _addresses(text)
    return ((m.start(), m.end()) for m in _PATTERNS[kind].finditer(text))


def _addresses(text: str) -> Iterator[tuple[int, int]]:
    """Street lines, each followed by its second line (suite, apartment, unit) as a span of its own: the two
    lines stay two values, as an address form keeps them."""
    for m in _PATTERNS["ADDRESS"].finditer(text):
        yield m.start(), m.end()
        unit = _UNIT.match(text, m.end())
        if unit:
            yield unit.start(1), unit.end(1)


def _key(kind: str, value: str) -> tuple[str, str]:
    """The vault's identity of a value: emails compare case-insensitively, everything else exactly."""
    value = value.strip()
    return kind, value.lower() if kind == "EMAIL" else value


@dataclass
class Vault:
    """Placeholder <-> value for one session; never serialised with its values."""

    kinds: tuple[str, ...] = PII_KINDS
    _by_value: dict[tuple[str, str], str] = field(default_factory=dict)
    _by_id: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_entries(cls, entries: dict[str, str], kinds: tuple[str, ...] = PII_KINDS) -> Vault:
        """A vault holding ``entries`` (placeholder -> value), e.g. as a pre-guard returned them."""
        vault = cls(kinds)
        for pid, value in entries.items():
            m = PLACEHOLDER_RE.fullmatch(pid)
            if m:
                vault._by_id[pid] = value
                vault._by_value[_key(m.group(1), value)] = pid
        return vault

    def entries(self) -> dict[str, str]:
        """Placeholder -> value (for handing the vault to the pipeline; keep it out of logs)."""
        return dict(self._by_id)

    def ids(self) -> list[str]:
        """The placeholders issued so far, sorted."""
        return sorted(self._by_id)

    def digest(self, pid: str) -> str | None:
        """A short hash of a placeholder's value: lets a later turn check it resolves the same."""
        value = self._by_id.get(pid)
        return None if value is None else hashlib.sha256(value.encode()).hexdigest()[:12]

    def adopt(self, entries: dict[str, str]) -> list[str]:
        """Take over values an earlier turn observed (a record's address) that this turn has not seen yet: each
        keeps its placeholder where that id is free here, else gets the next free one of its kind (what crosses
        turns does so by value: :meth:`conceal`); returns the placeholders they hold here."""
        taken: list[str] = []
        later: list[tuple[str, str]] = []
        for pid, value in entries.items():
            m = PLACEHOLDER_RE.fullmatch(pid)
            if not m or not isinstance(value, str) or _key(m.group(1), value) in self._by_value:
                continue
            if pid in self._by_id:
                later.append((m.group(1), value))  # renamed once every free id is kept
                continue
            self._by_id[pid] = value
            self._by_value[_key(m.group(1), value)] = pid
            taken.append(pid)
        return taken + [self._placeholder(kind, value) for kind, value in later]

    def _placeholder(self, kind: str, value: str) -> str:
        key = _key(kind, value)
        pid = self._by_value.get(key)
        if pid is None:
            n = 1 + max((int(m.group(2)) for p in self._by_id if (m := PLACEHOLDER_RE.fullmatch(p))
                         and m.group(1) == kind), default=0)
            pid = f"[{kind}_{n}]"
            self._by_value[key] = pid
            self._by_id[pid] = value.strip()
        return pid

    def redact(self, text: str) -> str:
        """``text`` with every PII span replaced by its placeholder (idempotent)."""
        if not text:
            return text
        out: list[str] = []
        last = 0
        for m in detect_pii(text, self.kinds):
            out.append(text[last : m.start])
            out.append(self._placeholder(m.kind, m.value))
            last = m.end
        out.append(text[last:])
        return "".join(out)

    def redact_obj(self, obj: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (dict keys too)."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact(str(k)): self.redact_obj(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.redact_obj(v) for v in obj]
        return obj

    def unresolved(self, obj: Any) -> list[str]:
        """Placeholders inside ``obj`` that this vault cannot resolve."""
        missing: list[str] = []
        stack = [obj]
        while stack:
            cur = stack.pop()
            if isinstance(cur, str):
                missing += [m.group(0) for m in PLACEHOLDER_RE.finditer(cur) if m.group(0) not in self._by_id]
            elif isinstance(cur, dict):
                stack.extend(cur.values())
            elif isinstance(cur, list | tuple):
                stack.extend(cur)
        return sorted(set(missing))

    def conceal(self, obj: Any) -> Any:
        """A copy of a JSON-like value with every value this vault holds replaced by its placeholder (the inverse
        of :meth:`resolve` for values it knows, whatever their kind looks like: a bare second address line too).
        Longest values first, never inside a longer word or number; dict keys untouched."""
        values = sorted({v for v in self._by_id.values() if v}, key=len, reverse=True)
        if not values:
            return obj
        by_value = {v: p for p, v in sorted(self._by_id.items(), reverse=True)}
        pattern = re.compile(r"(?<![\w@.+-])(?:" + "|".join(map(re.escape, values)) + r")(?![\w@-])")

        def one(text: str) -> str:
            return pattern.sub(lambda m: by_value[m.group(0)], text)

        def walk(cur: Any) -> Any:
            if isinstance(cur, str):
                return one(cur)
            if isinstance(cur, dict):
                return {k: walk(v) for k, v in cur.items()}
            if isinstance(cur, list | tuple):
                return [walk(v) for v in cur]
            return cur

        return walk(obj)

    def restore(self, text: str) -> str:
        """``text`` with every known placeholder replaced by its value (unknown ones stay)."""
        return PLACEHOLDER_RE.sub(lambda m: self._by_id.get(m.group(0), m.group(0)), text)

    def resolve(self, obj: Any) -> Any:
        """A copy of a JSON-like value with known placeholders replaced by their values."""
        if isinstance(obj, str):
            return self.restore(obj)
        if isinstance(obj, dict):
            return {k: self.resolve(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.resolve(v) for v in obj]
        return obj


#: What :func:`mask_pii_fields` writes in place of a value a log must not hold.
MASKED = "[REDACTED]"


def mask_pii_fields(obj: Any, fields: frozenset[str] = PII_FIELDS) -> Any:
    """A copy of a JSON-like value for logs: values under a :data:`PII_FIELDS` key become :data:`MASKED`.

    A value that is already one placeholder stays (it is what the session's
    models saw). A string holding a JSON object (a model's raw decision) is
    masked inside and written back compactly.
    """
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if k in fields and v not in (None, "") and not (isinstance(v, str) and PLACEHOLDER_RE.fullmatch(v)):
                out[k] = MASKED if isinstance(v, str | int | float) else mask_pii_fields(v, fields)
            else:
                out[k] = mask_pii_fields(v, fields)
        return out
    if isinstance(obj, list | tuple):
        return [mask_pii_fields(v, fields) for v in obj]
    if isinstance(obj, str) and obj.startswith("{") and any(f'"{f}"' in obj for f in fields):
        try:
            parsed = json.loads(obj)
        except ValueError:
            return obj
        if isinstance(parsed, dict):
            return json.dumps(mask_pii_fields(parsed, fields), ensure_ascii=False, separators=(", ", ": "))
    return obj
