"""pairwatch.chaos (usage guide written below)."""

from .backend import DEFAULT_HANDLERS, Backend, Handler, RpcError
from .engine import Engine
from .faults import KINDS, Fault, FaultMix, FaultPlan, FaultScript, Injected, parse_fault
from .server import ChaosServer

__all__ = [
    "DEFAULT_HANDLERS",
    "KINDS",
    "Backend",
    "ChaosServer",
    "Engine",
    "Fault",
    "FaultMix",
    "FaultPlan",
    "FaultScript",
    "Handler",
    "Injected",
    "RpcError",
    "parse_fault",
]
