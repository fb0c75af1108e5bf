"""A model package whose import takes seconds of CPU (it builds tables, as transformers,
hydra's plugins or a model zoo do at import): a stand-in for the heavy imports of a real
training script. It calls no time function and waits on nothing: it only computes."""

from heavy_model import tables

VOCAB = tables.VOCAB
