"""Writes the stranger's JSONL dataset: ``python make_jsonl.py DIR``: 40 documents of 1 to 5
examples each."""

import json
import random
import sys


def write(root: str, docs: int = 40) -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    with open(f"{root}/train.jsonl", "w") as f:
        for doc in range(docs):
            for k in range(rng.randint(1, 5)):
                text = " ".join(rng.choice(words) for _ in range(6))
                f.write(json.dumps({"doc": doc, "text": f"{doc}.{k} {text}",
                                    "label": rng.randint(0, 3)}) + "\n")


if __name__ == "__main__":
    write(sys.argv[1])
