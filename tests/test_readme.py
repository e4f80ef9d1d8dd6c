"""The README says what the code does: its settings table, its errors table, the fields of
``GET /v1/cache`` and the accuracy it promises, each checked against the code (the HTTP
layer's refusals against a real server too). Each check is a function of the README's text
that lists what is wrong, so a README that says otherwise is shown to fail it."""

from __future__ import annotations

import ast
import gc
import importlib
import os
import pkgutil
import re
import socket
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal, get_args, get_origin

import httpx
import orjson
import pytest
from pydantic import BeforeValidator

import service
from service.app import create_app
from service.encodings.catalogue import PRESETS
from service.errors import PROBLEM_BASE, InvalidParameter, PlotsUnavailable, ServiceError
from service.server import protocol
from service.settings import Settings, SettingsError, from_environment, parse_bytes
from tests.encodings import test_exact
from tests.support import (
    HEATMAP,
    ROOT,
    TABLE,
    WAIT,
    cache_stats,
    in_process,
    read_to_close,
    running,
    syntax_nodes,
    table_url,
)

# The README and the reference pages it leads to, read as one document.
PAGES: Final = ("http-api", "explorer", "clients", "deploy", "settings", "performance", "testing")
README: Final = "\n".join(
    [(ROOT / "README.md").read_text(), *((ROOT / "docs" / f"{p}.md").read_text() for p in PAGES)]
)
RELIABILITY: Final = (ROOT / "RELIABILITY.md").read_text()
BLANK: Final = "about:blank"


def section(text: str, heading: str) -> str:
    """The lines under ``heading`` (a whole line, ``## Name``) up to the next heading of
    its level or above."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    level = len(heading) - len(heading.lstrip("#"))
    above = re.compile(rf"#{{1,{level}}} ")
    end = next((i for i in range(start, len(lines)) if above.match(lines[i])), len(lines))
    return "\n".join(lines[start:end])


def table(text: str) -> list[list[str]]:
    """The cells of the first Markdown table in ``text``, header and rule left out."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        rows.append([cell.strip() for cell in cells])
    return rows


def code(text: str) -> list[str]:
    """The code spans in ``text``, in order."""
    return re.findall(r"`([^`]+)`", text)


# --- Settings ------------------------------------------------------------------------------

# "`512MiB`", "`0` (off)", "`67108864` (2^26)", "`2147483647` (2^31 - 1)", "`256KiB` (a second)"
_DEFAULT: Final = re.compile(r"`(?P<value>[^`]*)`(?: \((?P<note>[^()]*)\))?")
_POWER: Final = re.compile(r"2\^(?P<exponent>\d+)(?: - (?P<less>\d+))?")


def _is_bytes(name: str) -> bool:
    return any(
        isinstance(item, BeforeValidator) and item.func is parse_bytes
        for item in Settings.model_fields[name].metadata
    )


def documented_default(name: str, cell: str) -> object:
    """The default that the README's cell gives setting ``name``, read as the setting's
    type reads it; ``ValueError`` for a cell that is not one, or whose note (a power of
    two) is not its value."""
    if cell == "empty":
        return ""
    match = _DEFAULT.fullmatch(cell)
    if match is None:
        raise ValueError(f"{cell!r} is not `value` with an optional (note)")
    text, note = match["value"], match["note"]
    annotation = Settings.model_fields[name].annotation
    value: object
    if _is_bytes(name):
        value = parse_bytes(text)
    elif annotation is int:
        if not re.fullmatch(r"\d+", text):
            raise ValueError(f"{text!r} is not a whole number")
        value = int(text)
    elif annotation is float:
        if not re.fullmatch(r"\d+(?:\.\d+)?", text):
            raise ValueError(f"{text!r} is not a number")
        value = float(text)
    else:
        value = text
    if note is not None and re.search(r"\d", note):
        power = _POWER.fullmatch(note)
        if power is None:
            raise ValueError(f"({note}) is neither words nor a power of two")
        if 2 ** int(power["exponent"]) - int(power["less"] or 0) != value:
            raise ValueError(f"({note}) is not {text}")
    return value


def settings_problems(readme: str) -> list[str]:
    """What the README's "## Settings" table and intro say wrong of ``Settings``."""
    text = section(readme, "## Settings")
    rows = {row[0].strip("`"): row for row in table(text)}
    known = {f"PE_{name.upper()}": name for name in Settings.model_fields}
    problems = [f"{var} is not documented" for var in sorted(known.keys() - rows.keys())]
    problems += [f"{var} is not a setting" for var in sorted(rows.keys() - known.keys())]
    for var in sorted(known.keys() & rows.keys()):
        name, (_, cell, meaning) = known[var], rows[var]
        default = Settings.model_fields[name].default
        try:
            value = documented_default(name, cell)
        except ValueError as error:
            problems.append(f"{var}: {error}")
            continue
        if type(value) is not type(default) or value != default:
            problems.append(f"{var}: the README says {cell}, the default is {default!r}")
        annotation = Settings.model_fields[name].annotation
        if get_origin(annotation) is Literal:
            missing = set(get_args(annotation)) - set(code(meaning))
            problems += [f"{var}: {choice!r} is not documented" for choice in sorted(missing)]
    intro = " ".join(text[: text.index("| variable |")].split())
    sizes = re.search(r"Sizes in bytes \(([^)]*)\)", intro)
    listed = set(code(sizes[1])) if sizes else set()
    in_bytes = {var for var, name in known.items() if _is_bytes(name)}
    if listed != in_bytes:
        problems.append(
            f"the intro lists {sorted(listed)} as sizes in bytes, not {sorted(in_bytes)}"
        )
    return problems


def test_the_settings_table_is_the_settings_model() -> None:
    assert settings_problems(README) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param("| `PE_PORT` | `8000` |", "| `PE_PORT` | `8080` |", id="wrong-int"),
        pytest.param("`512MiB` | cache", "`256MiB` | cache", id="wrong-size"),
        pytest.param("`512MiB` | cache", "`512MB` | cache", id="not-a-size"),
        pytest.param("`67108864` (2^26)", "`67108864` (2^25)", id="wrong-power"),
        pytest.param("(2^31 - 1) | largest", "(2^31) | largest", id="wrong-power-less"),
        pytest.param("`0` (off)", "`0` (off, 1)", id="digits-in-a-note"),
        pytest.param("| `PE_PRELOAD` | empty |", "| `PE_PRELOAD` | none |", id="not-empty"),
        pytest.param("`10` | seconds of grace", "`10.5` | seconds of grace", id="wrong-float"),
        pytest.param("| `PE_LOG_FORMAT` | `text` |", "| `PE_LOG_FORMAT` | `json` |", id="choice"),
        pytest.param("`info` or `debug`", "`info`", id="choices-left-out"),
        pytest.param("| `PE_WORKERS` |", "| `PE_WORKER` |", id="misnamed"),
        pytest.param("`PE_MIN_READ_RATE`) take", "`PE_MAX_ELEMENTS`) take", id="not-in-bytes"),
    ],
)
def test_a_wrong_settings_table_fails(old: str, new: str) -> None:
    assert old in README
    assert settings_problems(README.replace(old, new, 1))


def test_a_setting_left_out_fails() -> None:
    row = next(line for line in README.splitlines() if line.startswith("| `PE_BODY_TIMEOUT` |"))
    problems = settings_problems(README.replace(row + "\n", ""))
    assert problems == ["PE_BODY_TIMEOUT is not documented"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        pytest.param("PE_CACHE_SIZE", "1", id="unknown"),
        pytest.param("PE_PORT", "80a", id="malformed"),
    ],
)
def test_the_settings_intro_quotes_the_messages(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intro's examples of the one line that stops start-up are the lines it prints."""
    for name in list(os.environ):
        if name.upper().startswith("PE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        from_environment()
    intro = section(README, "## Settings").split("| variable |")[0]
    quoted = [span for span in code(intro) if span.startswith(variable)]
    assert quoted
    assert str(caught.value).startswith(quoted[0])


# --- Errors --------------------------------------------------------------------------------


def documented_problems(readme: str) -> set[tuple[int, str]]:
    """(status, type) of every row of the README's "### Errors" table."""
    found = set()
    for status, kind, when in table(section(readme, "### Errors")):
        (problem_type,) = code(kind)
        assert when, f"{status} {problem_type}: say when"
        found |= {(int(number), problem_type) for number in status.split(",")}
    return found


def error_classes() -> list[type[ServiceError]]:
    """Every error class of the service's that reaches a client as a problem document: the
    subclasses of ``ServiceError`` (the root itself is never raised), but for the Open
    Inference Protocol's own (``service.inference``: ``/v2`` answers in its own shape)."""
    for module in pkgutil.walk_packages(service.__path__, "service."):
        try:
            importlib.import_module(module.name)
        except ImportError:  # an extra that is not installed (grpc)
            continue
    found: list[type[ServiceError]] = []
    pending = list(ServiceError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if not cls.__module__.startswith("service.inference"):
            found.append(cls)
    return found


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


# the functions that answer a literal status with a problem document (about:blank unless
# a type is given): web.problems' problem and _answer, the framework's HTTPException, the
# protocol's _refuse
_ANSWERING: Final = {"problem", "_answer", "HTTPException", "_refuse"}


def literal_problems() -> set[tuple[int, str]]:
    """(status, type) of every problem the code answers with a status written out: calls of
    ``_ANSWERING`` in ``service/``, and the HTTP protocol's refusals."""
    found = {(status, BLANK) for status in protocol._REASONS}
    for path in sorted((ROOT / "service").rglob("*.py")):
        for node in syntax_nodes(path):
            if not (isinstance(node, ast.Call) and _callee(node) in _ANSWERING):
                continue
            statuses = [
                arg.value
                for arg in node.args[:2]
                if isinstance(arg, ast.Constant) and type(arg.value) is int
            ]
            if not statuses:  # a status passed on (an error class's): not written out here
                continue
            where = f"{path.relative_to(ROOT)}: {ast.unparse(node)}"
            assert len(statuses) == 1, where
            assert 400 <= statuses[0] < 600, where
            kinds = [k.value for k in node.keywords if k.arg == "type"]
            kind = kinds[0].value if kinds and isinstance(kinds[0], ast.Constant) else None
            assert kind is None or isinstance(kind, str), where
            assert kind is not None or not kinds, f"{where}: a type that is not written out"
            found.add((statuses[0], kind or BLANK))
    return found


def framework_problems() -> set[tuple[int, str]]:
    """(status, type) of the framework's own refusals, from the app in process."""
    found = set()
    with in_process(create_app(Settings())) as http:
        for response in (http.get("/no/such/path"), http.delete("/v1/cache")):
            assert response.headers["content-type"] == "application/problem+json"
            found.add((response.status_code, response.json()["type"]))
    return found


def _type_of(cls: type[ServiceError]) -> str:
    return PROBLEM_BASE + cls.slug  # as ServiceError.type


@pytest.fixture(scope="module")
def problems_of_the_code() -> set[tuple[int, str]]:
    found = {(cls.status, _type_of(cls)) for cls in error_classes()}
    return found | literal_problems() | framework_problems()


def test_the_errors_table_is_every_problem_the_code_answers(
    problems_of_the_code: set[tuple[int, str]],
) -> None:
    documented = documented_problems(README)
    assert problems_of_the_code - documented == set(), "not in the README's errors table"
    assert documented - problems_of_the_code == set(), "in the errors table, not in the code"


def test_the_code_is_read_for_every_kind_of_problem(
    problems_of_the_code: set[tuple[int, str]],
) -> None:
    """The derivation finds each source: error classes, literal statuses in the service,
    the protocol's refusals and the framework's."""
    assert {
        (422, _type_of(InvalidParameter)),
        (501, _type_of(PlotsUnavailable)),
        (503, BLANK),
        (403, BLANK),
        (500, BLANK),
        (414, BLANK),
        (431, BLANK),
        (405, BLANK),
    } <= problems_of_the_code


@pytest.mark.parametrize(
    "row",
    [
        pytest.param("| 431 | `about:blank` |", id="431"),
        pytest.param("| 501 | `urn:positional-encodings:problem:plots-unavailable` |", id="501"),
        pytest.param("| 499 |", id="499"),
    ],
)
def test_a_problem_left_out_of_the_table_fails(
    row: str, problems_of_the_code: set[tuple[int, str]]
) -> None:
    line = next(line for line in README.splitlines() if line.startswith(row))
    assert problems_of_the_code - documented_problems(README.replace(line + "\n", ""))


def test_a_row_of_no_problem_fails(problems_of_the_code: set[tuple[int, str]]) -> None:
    made_up = "| 429 | `about:blank` | too many requests |\n"
    readme = README.replace("| 431 |", made_up + "| 431 |", 1)
    assert documented_problems(readme) - problems_of_the_code == {(429, BLANK)}


def test_a_new_error_class_fails(problems_of_the_code: set[tuple[int, str]]) -> None:
    class Teapot(ServiceError):
        status = 418
        slug = "teapot"

    try:
        found = {(cls.status, _type_of(cls)) for cls in error_classes()}
    finally:
        del Teapot
        gc.collect()  # out of ServiceError.__subclasses__() again
    assert (418, "urn:positional-encodings:problem:teapot") in found - documented_problems(README)


# The HTTP layer's refusals, from a real server: one without matplotlib (a package that
# fails to import, first on its path), whose request heads must be complete in half a second


@pytest.fixture(scope="module")
def bare_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("without-plots")
    (path / "matplotlib").mkdir()
    (path / "matplotlib" / "__init__.py").write_text('raise ImportError("left out")\n')
    search = os.pathsep.join(filter(None, [str(path), os.environ.get("PYTHONPATH")]))
    with running({"PYTHONPATH": search, "PE_HEAD_TIMEOUT": "0.5"}) as url:
        yield url


def _exchange(url: str, request: bytes) -> tuple[int, dict[str, Any]]:
    """Send ``request`` on a connection of its own, and read the answer until it closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(request)
        answer = read_to_close(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head.lower(), head
    return int(head.split()[1]), orjson.loads(body)


def _get(url: str, target: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(url + target, timeout=WAIT)
    assert response.headers["content-type"] == "application/problem+json"
    return response.status_code, response.json()


_TARGET: Final = TABLE + "?max_len=4&d_model=4&" + "x" * (protocol.MAX_TARGET_BYTES + 10)
_HEAD: Final = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 1000) for i in range(40))
_REFUSALS: Final[list[tuple[int, Callable[[str], tuple[int, dict[str, Any]]]]]] = [
    (414, lambda url: _get(url, _TARGET)),
    (431, lambda url: _exchange(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + _HEAD + b"\r\n")),
    (400, lambda url: _exchange(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")),
    (408, lambda url: _exchange(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")),  # no end
    (501, lambda url: _get(url, HEATMAP + "?max_len=4&d_model=4")),
]


@pytest.mark.parametrize(("status", "ask"), [pytest.param(*r, id=str(r[0])) for r in _REFUSALS])
def test_a_real_server_answers_the_documented_refusals(
    status: int, ask: Callable[[str], tuple[int, dict[str, Any]]], bare_server: str
) -> None:
    answered, document = ask(bare_server)
    assert answered == document["status"] == status, document
    assert (status, document["type"]) in documented_problems(README)


# --- GET /v1/cache -------------------------------------------------------------------------

# where the README lists /v1/cache's fields: its row in "### Other endpoints"
CACHE_ROW: Final = "`GET /v1/cache`"


def documented_cache_fields(readme: str) -> tuple[set[str], set[str]]:
    """The fields of ``/v1/cache`` that the README names, and those of each of its
    ``tables`` (after "each with")."""
    row = next(r for r in table(section(readme, "### Other endpoints")) if r[0] == CACHE_ROW)
    fields, _, each = row[1].partition("each with")

    def names(text: str) -> set[str]:
        return {span for span in code(text) if re.fullmatch(r"[a-z_]+", span)}

    return names(fields), names(each)


@pytest.fixture(scope="module")
def cache_answer() -> dict[str, Any]:
    with in_process(create_app(Settings())) as http:
        assert http.get(table_url(max_len=4, d_model=4)).status_code == 200
        return cache_stats(http)


def test_the_cache_fields_are_the_live_answers(cache_answer: dict[str, Any]) -> None:
    fields, each = documented_cache_fields(README)
    assert fields == set(cache_answer)
    assert cache_answer["tables"]
    assert each == set(cache_answer["tables"][0])


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param("`evictions`, ", "", id="field-left-out"),
        pytest.param("`pages`, `page_rows`", "`pages`", id="table-field-left-out"),
        pytest.param("`hits` and", "`hits`, `hit_rate` and", id="field-made-up"),
    ],
)
def test_a_wrong_cache_field_list_fails(old: str, new: str, cache_answer: dict[str, Any]) -> None:
    fields, each = documented_cache_fields(README.replace(old, new, 1))
    assert (fields, each) != (set(cache_answer), set(cache_answer["tables"][0]))


# --- Accuracy ------------------------------------------------------------------------------


def accuracy_claims(readme: str, reliability: str) -> dict[str, object]:
    """The numbers of the README's "Exact." bullet and of RELIABILITY.md's accuracy row."""
    bullet = re.search(r"^- \*\*Exact\.\*\*(.*?)(?=^- |\Z)", readme, re.M | re.S)
    assert bullet is not None
    text = " ".join(bullet[1].split())
    f64 = re.search(r"float64 entries are within 2\^-(\d+) \(([0-9.]+e-\d+)\)", text)
    tutorial = re.search(r"are off by ([0-9.e-]+) to ([0-9.e-]+) near position 10\^6", text)
    row = next(line for line in reliability.splitlines() if "every float64 entry is within" in line)
    reliable = re.search(r"every float64 entry is within 2\^-(\d+) \(([0-9.]+e-\d+)", row)
    return {
        "float64": 2.0 ** -int(f64[1]) if f64 else None,
        "float64 shown": float(f64[2]) if f64 else None,
        "float32 rounded once": "float32 entries are the float64 ones rounded once" in text,
        "tutorial": (float(tutorial[1]), float(tutorial[2])) if tutorial else None,
        "reliability": 2.0 ** -int(reliable[1]) if reliable else None,
        "reliability shown": float(reliable[2]) if reliable else None,
    }


def _tested() -> dict[str, object]:
    bound = test_exact.F64_BOUND
    shown = float(f"{bound:.1e}")
    return {
        "float64": bound,
        "float64 shown": shown,
        "float32 rounded once": True,
        "tutorial": test_exact.TUTORIAL_ERROR,
        "reliability": bound,
        "reliability shown": shown,
    }


def test_the_accuracy_promised_is_the_accuracy_tested() -> None:
    """README and RELIABILITY.md state the bounds tests/encodings/test_exact.py asserts."""
    assert accuracy_claims(README, RELIABILITY) == _tested()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param("within 2^-51 (4.4e-16) of", "within 2.3e-16 of", id="old-claim"),
        pytest.param("within 2^-51 (4.4e-16) of", "within 2^-52 (2.2e-16) of", id="tighter"),
        pytest.param("2^-51 (4.4e-16) of", "2^-51 (4.5e-16) of", id="wrong-decimal"),
        pytest.param("1e-2 to 1e-1 near", "~3e-3 at", id="tutorial"),
        pytest.param("float32\n  entries are the float64 ones", "float32\n  entries are", id="f32"),
    ],
)
def test_a_wrong_accuracy_claim_fails(old: str, new: str) -> None:
    assert old in README
    assert accuracy_claims(README.replace(old, new, 1), RELIABILITY) != _tested()


def test_a_wrong_reliability_row_fails() -> None:
    wrong = RELIABILITY.replace("is within 2^-51 (4.4e-16", "is within 2^-50 (8.9e-16", 1)
    assert accuracy_claims(README, wrong) != _tested()


def preset_rows() -> dict[str, list[str]]:
    """The README's preset table: each preset's own parameters, as its last column names them."""
    rows: dict[str, list[str]] = {}
    for line in README.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if len(cells) == 6 and cells[0].startswith("`") and cells[0].strip("`") in PRESETS:
            rows[cells[0].strip("`")] = re.findall(r"`([a-z_]+)`", cells[-1])
    return rows


def test_the_preset_table_names_each_presets_own_parameters() -> None:
    """fairseq was said to take `base`, which the service refuses."""
    rows = preset_rows()
    assert rows.keys() == PRESETS.keys()
    for name, preset in PRESETS.items():
        assert rows[name] == [param.name for param in preset.params], name


def test_the_readme_is_a_page_not_a_manual() -> None:
    """At most 8 KiB, with a quick start and a table of contents into docs/, every link of
    which exists."""
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 8 * 1024
    for heading in ("## Run it", "## Quick start", "## Check it", "## Documentation"):
        assert heading in text
    links = re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", text)
    assert len(links) >= 8
    assert [link for link in links if not (ROOT / link).exists()] == []
