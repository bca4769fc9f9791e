"""The served-performance tests share serving_cases.py (pytest runs with importlib mode)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # tests/plan: from_log_cases.py
