"""Training throughput on packed rows against padded records, side by side.

A tiny BERT (HF transformers' BertForPreTraining, 2 layers, hidden 128, CPU,
one thread) trains a fixed number of steps on each layout of the same data,
in turns, at the same token slots per step (batch x max_seq_length), with
the masked-LM and sentence-pair losses of each layout; a step's cost is its
CPU time (forward, backward, optimizer; not the collation):

- padded: the original's records, padded to max_seq_length, as
  run_pretraining.py feeds them (the loaders' "hf" batches at a fixed shape);
- packed: --pack_sequences rows (the loaders' "blocks" batches: the
  block-diagonal mask, restarted positions, the pair loss over each
  sequence's [CLS]).

It prints the instances (sequences) trained per CPU-second of each and their
ratio, beside what packing can give back: the instances a packed row holds
on average, 1 / (1 - the padded data's padding share) at most.

    .venv/bin/python bench/packed_training.py --shapes wikitext,web --lengths 128,512
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import torch
from torch.nn.functional import cross_entropy
from transformers import BertConfig, BertForPreTraining

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # for bench.*

from bench.corpus import corpus_path  # noqa: E402
from bench.packing import make  # noqa: E402
from bert_pretraining_data.loaders.torch_data import Collator, PretrainingDataset  # noqa: E402

TOKENS_PER_STEP = 4096
WARM_UP_STEPS = 3


def model_for(max_length: int) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig(
        vocab_size=30522, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=512, max_position_embeddings=max_length,
        attn_implementation="sdpa"))


def packed_loss(model: BertForPreTraining, batch: dict) -> torch.Tensor:
    """The masked-LM loss over every masked token of the rows, and the
    sentence-pair loss over every sequence's [CLS] (docs/packing.md)."""
    hidden = model.bert(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                        position_ids=batch["position_ids"],
                        attention_mask=batch["attention_mask"]).last_hidden_state
    mlm = cross_entropy(model.cls.predictions(hidden).flatten(0, 1), batch["labels"].flatten())
    cls = hidden[torch.arange(len(hidden))[:, None], batch["next_sentence_positions"]]
    pooled = model.bert.pooler.activation(model.bert.pooler.dense(cls))
    nsp = cross_entropy(model.cls.seq_relationship(pooled).flatten(0, 1),
                        batch["next_sentence_label"].flatten())
    return mlm + nsp


def padded_loss(model: BertForPreTraining, batch: dict) -> torch.Tensor:
    return model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                 attention_mask=batch["attention_mask"], labels=batch["labels"],
                 next_sentence_label=batch["next_sentence_label"]).loss


class Trainer:
    """One model and optimizer, fed the records of one dataset in order."""

    def __init__(self, dataset: pathlib.Path, collate: Collator, loss_of, max_length: int):
        self.model = model_for(max_length)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.records = iter(PretrainingDataset(str(dataset), shuffle=False))
        self.batch_size = TOKENS_PER_STEP // max_length
        self.collate, self.loss_of = collate, loss_of
        self.seconds, self.instances = 0.0, 0

    def step(self, *, timed: bool) -> None:
        """One training step; timed steps add their CPU seconds (this process,
        one thread: what the step costs, whatever else the machine runs) and
        instances."""
        items = [next(self.records) for _ in range(self.batch_size)]
        batch = self.collate(items)
        start = time.process_time()
        self.loss_of(self.model, batch).backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        if timed:
            self.seconds += time.process_time() - start
            self.instances += sum(len(getattr(item, "sequences", [item])) for item in items)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=5, help="MB of each corpus shape")
    parser.add_argument("--shapes", default="wikitext,web")
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("| corpus | max_seq_length | padding share | padded instances/CPU-s | packed "
          "instances/CPU-s | packed / padded | instances a row | 1 / (1 - padding) |\n"
          "|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            corpus = corpus_path(args.size, shape=shape)
            for max_length in map(int, args.lengths.split(",")):
                work = pathlib.Path(tmp)
                make(corpus, "text", max_length, work / "padded")
                packing = make(corpus, "text", max_length, work / "packed",
                               "--pack_sequences")["packing"]
                predictions = round(max_length * 0.15)
                padding = 1 - packing["tokens"] / (packing["instances"] * max_length)
                trainers = (Trainer(work / "padded",
                                    Collator(style="hf", shape=(max_length, predictions)),
                                    padded_loss, max_length),
                            Trainer(work / "packed", Collator(style="blocks",
                                                              shape=(max_length, 0)),
                                    packed_loss, max_length))
                for step in range(WARM_UP_STEPS + args.steps):  # in turns, side by side
                    for trainer in trainers:
                        trainer.step(timed=step >= WARM_UP_STEPS)
                padded_rate, packed_rate = (t.instances / t.seconds for t in trainers)
                print(f"| {shape} | {max_length} | {padding:.1%} | {padded_rate:,.1f} | "
                      f"{packed_rate:,.1f} | **{packed_rate / padded_rate:.2f}x** | "
                      f"{packing['instances'] / packing['rows']:.2f} | "
                      f"{1 / (1 - padding):.2f}x |", flush=True)


if __name__ == "__main__":
    main()
