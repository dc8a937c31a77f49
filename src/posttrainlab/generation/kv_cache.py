"""The shared-prefix sampler's KV cache: one prefix's keys and values expanded N-fold, with room to grow.

After one prefill per prefix, ``generation.shared_prefix`` decodes its N continuations together from
an N-fold copy of that prefix's cache. transformers' ``DynamicLayer.update`` concatenates, copying
the whole cache at every decode step: for N rows of a long prefix that copy, not the arithmetic, is
most of the decode time on a CPU. ``preallocate`` replaces each filled layer by a ``GrowingLayer``
whose keys/values live in a buffer with room for the new tokens, so a decode step writes one position
in place (``bench/bench_mc_sampling.py`` separates this gain from the shared prefill's). Layers of
another kind (sliding window, ...) keep transformers' own ``batch_repeat_interleave`` expansion.
Written by hand because transformers has no preallocated layer that also expands a prefilled cache.
"""

from __future__ import annotations

import functools


@functools.cache
def growing_layer_class():
    """The ``GrowingLayer`` class (built on first use, so importing this module does not import transformers)."""
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys/values live in a buffer with room to grow: appending writes in place.

        ``keys`` and ``values`` are views of the filled part of a preallocated buffer.
        """

        def __init__(self, keys, values, repeats: int, extra: int):
            super().__init__()
            rows, heads, length, dim = keys.shape
            self._k = keys.new_empty(rows * repeats, heads, length + extra, dim)
            self._v = values.new_empty(rows * repeats, values.shape[1], length + extra, values.shape[-1])
            self._k.view(rows, repeats, heads, length + extra, dim)[:, :, :, :length] = keys[:, None]
            self._v.view(rows, repeats, *self._v.shape[1:])[:, :, :, :length] = values[:, None]
            self.length, self.device, self.is_initialized = length, keys.device, True
            self._views()

        def _views(self) -> None:
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

        def update(self, key_states, value_states, *args, **kwargs):
            import torch

            new = key_states.shape[-2]
            if self.length + new > self._k.shape[-2]:  # out of room: grow (not reached by the sampler)
                self._k = torch.cat([self._k, torch.empty_like(self._k)], dim=-2)
                self._v = torch.cat([self._v, torch.empty_like(self._v)], dim=-2)
            self._k[:, :, self.length : self.length + new] = key_states
            self._v[:, :, self.length : self.length + new] = value_states
            self.length += new
            self._views()
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._views()

    return GrowingLayer


def preallocate(cache, repeats: int, extra: int) -> None:
    """Replace each filled layer of ``cache`` by its ``repeats``-fold expansion, ``extra`` positions longer."""
    from transformers.cache_utils import DynamicLayer

    layer_class = growing_layer_class()
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.get_seq_length() > 0:
            cache.layers[i] = layer_class(layer.keys, layer.values, repeats, extra)
        elif repeats > 1:  # any other kind of layer (sliding window, ...): transformers' own expansion
            layer.batch_repeat_interleave(repeats)


__all__ = ["growing_layer_class", "preallocate"]
