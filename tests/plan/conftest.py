"""The plan tests share the Hub stand-in in hub_stand_in.py (pytest runs with importlib mode)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
