"""Runs a PyTorch peer script under PyTorch's CPU mixed precision, without editing it: every
outermost nn.Module call (a model's forward, its loss included when the model computes it) runs
under torch.cpu.amp.autocast(dtype=torch.bfloat16); backward and the optimizer run outside, as
PyTorch's autocast recipe has them.
  /usr/bin/python3 tools/bench/peer_autocast.py PEER.py [the peer's own arguments]
"""
import runpy
import sys
import threading

import torch

_module_call = torch.nn.Module.__call__
_inside = threading.local()


def _call_under_autocast(self, *args, **kwargs):
    if getattr(_inside, "module", False):  # an inner module: already under autocast
        return _module_call(self, *args, **kwargs)
    _inside.module = True
    try:
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            return _module_call(self, *args, **kwargs)
    finally:
        _inside.module = False


if len(sys.argv) < 2:
    sys.exit("usage: peer_autocast.py PEER.py [arguments]")
torch.nn.Module.__call__ = _call_under_autocast
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
