"""``torch_xla.experimental``: eager mode is modelled (the shim is always eager); the
rest of the real package's experimental modules raise NotModelledError when used."""

from torch_xla.experimental.eager import eager_mode, eager_mode_context, is_eager_mode

__all__ = ["eager_mode", "eager_mode_context", "is_eager_mode"]
