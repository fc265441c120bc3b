"""bench/__init__.py: the logs' layout spelled once."""

from helpers import ROOT

MODULES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in (ROOT / "bench").rglob("*.py")
}


def test_the_logs_layout_is_spelled_once():
    from bench import logs_of

    assert logs_of("results", "B") == ROOT.joinpath("results", "logs", "B").relative_to(ROOT)
    sources = "".join(path.read_text() for path in MODULES.values())
    assert sources.count('"logs"') == 1  # bench/__init__.py's LOGS
