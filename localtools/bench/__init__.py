"""``localtools bench``: every mode and peer on the same BFCL-format cases, scored by our own
checker, plus the multi-turn scenarios (the ``bench`` extra)."""

from ._bfcl import CATEGORIES, Case, bfcl_data_dir, load_cases, sample
from ._checker import Verdict, check_calls
from ._peers import LlamaCppPythonPeer, NativePeer, OpenAIPeer, Peer, PeerError, PeerReply, parse_peer
from ._pooled import Pool, PooledMode, PooledResult, pool_tools, run_pooled, summarize_pooled
from ._runner import CaseResult, Mode, run_bench, summarize, write_json
from ._scenarios import SCENARIOS, TRANSLATED, Scenario, ScenarioResult, run_scenario, summarize_scenarios

__all__ = [
    "CATEGORIES",
    "SCENARIOS",
    "TRANSLATED",
    "Case",
    "CaseResult",
    "LlamaCppPythonPeer",
    "Mode",
    "NativePeer",
    "OpenAIPeer",
    "Peer",
    "PeerError",
    "PeerReply",
    "Pool",
    "PooledMode",
    "PooledResult",
    "Scenario",
    "ScenarioResult",
    "Verdict",
    "bfcl_data_dir",
    "check_calls",
    "load_cases",
    "parse_peer",
    "pool_tools",
    "run_bench",
    "run_pooled",
    "run_scenario",
    "sample",
    "summarize",
    "summarize_pooled",
    "summarize_scenarios",
    "write_json",
]
