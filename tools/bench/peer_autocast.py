"""Runs a PyTorch peer script under PyTorch's CPU mixed precision, without editing it: every
outermost nn.Module call (a model's forward, its loss included when the model computes it) runs
under torch.cpu.amp.autocast(dtype=torch.bfloat16); backward and the optimizer run outside, as
PyTorch's autocast recipe has them.
With --train-only, only training steps: autocast opens at the call of a module in training mode and
closes at the next backward, so a loss computed after the model is inside as in the recipe, and
calls in eval mode (decoding, evaluation) run in f32. PyTorch 1.13's nn.Transformer takes its fast
path in eval mode, and that path fails under autocast ("expected scalar type BFloat16 but found
Float").
  /usr/bin/python3 tools/bench/peer_autocast.py [--train-only] PEER.py [the peer's own arguments]
"""
import runpy
import sys
import threading

import torch

_module_call = torch.nn.Module.__call__
_backward = torch.autograd.backward
_state = threading.local()  # autocast's state is per thread


def _call_under_autocast(self, *args, **kwargs):
    if getattr(_state, "module", False):  # an inner module: already under autocast
        return _module_call(self, *args, **kwargs)
    _state.module = True
    try:
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            return _module_call(self, *args, **kwargs)
    finally:
        _state.module = False


def _call_opening_training_step(self, *args, **kwargs):
    if self.training and getattr(_state, "step", None) is None:
        _state.step = torch.cpu.amp.autocast(dtype=torch.bfloat16)
        _state.step.__enter__()
    return _module_call(self, *args, **kwargs)


def _backward_closing_training_step(*args, **kwargs):
    step = getattr(_state, "step", None)
    if step is not None:
        _state.step = None
        step.__exit__(None, None, None)
    return _backward(*args, **kwargs)


train_only = len(sys.argv) > 1 and sys.argv[1] == "--train-only"
if train_only:
    del sys.argv[1]
if len(sys.argv) < 2:
    sys.exit("usage: peer_autocast.py [--train-only] PEER.py [arguments]")
if train_only:
    torch.nn.Module.__call__ = _call_opening_training_step
    torch.autograd.backward = _backward_closing_training_step  # Tensor.backward calls it
else:
    torch.nn.Module.__call__ = _call_under_autocast
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
