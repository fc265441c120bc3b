"""The team's tools are scripts in tools/, not a package: their tests import them from there."""

import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))
