"""bench/__init__.py: the logs' layout spelled once."""

from helpers import MODULES, ROOT


def test_the_logs_layout_is_spelled_once():
    from bench import logs_of

    assert logs_of("results", "B") == ROOT.joinpath("results", "logs", "B").relative_to(ROOT)
    sources = "".join(path.read_text() for path in MODULES.values())
    assert sources.count('"logs"') == 1  # bench/__init__.py's LOGS
