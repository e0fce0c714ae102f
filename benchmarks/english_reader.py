"""Can a reader be trained here from the fit data? (issue #40's English line; fit data only)

    .venv/bin/python -m benchmarks.english_reader [--mode frozen|finetune|both] [--epochs 2]

English answerable questions refused with the right quote (XQuAD's paraphrased questions) and the
near-misses of issue #23 look the same to every local signal (benchmarks/RESULTS.md, "Every language",
sessions 27 and 29). A reader that reads the question *with* the sentence (a cross-encoder) is what
would separate them; no package installable here bundles one's weights, so this asks whether one can
be trained from the data the project may develop on: the SQuAD 2.0 subset's Normans and
Computational_complexity_theory (train and dev files; Rhine is left out: it is XQuAD-dev article 20,
in the report half) and XQuAD-dev English articles 0-11. Each (question, sentence of its paragraph)
pair is labelled 1 when the sentence holds a gold answer; an adversarial SQuAD question's sentence
holding its plausible answer is the hard negative (``adv``).

* ``frozen``: all-MiniLM-L6-v2 (the bundled model, ONNX) run on the *pair* (``[CLS] q [SEP] s``), its
  pooled question and sentence states fed to a logistic regression; leave-one-group-out (the two
  SQuAD articles alone, XQuAD's Normans with SQuAD's, the other eleven XQuAD articles in three groups).
  Beside it, the question's and the sentence's cosine, each embedded alone as the answer step does.
* ``finetune``: the same model fine-tuned as a cross-encoder (mean pooling, one linear head, BCE
  with the classes balanced, AdamW 3e-5, batch 16, CPU torch), trained with Normans and XQuAD
  articles 8-11 held out and scored on them.

Printed: ROC AUC over all held-out pairs, answerable against adversarial (``pos`` vs ``adv``) and
against the paragraph's other sentences (``pos`` vs ``other``), reader beside cosine. Needs the ``local``
extra (``make setup``: torch, transformers, and scikit-learn through sentence-transformers).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from benchmarks.answers_loco import SHARED

HELD_OUT = ("Normans", "Black_Death", "American_Broadcasting_Company", "Genghis_Khan", "Civil_disobedience")


def pairs() -> list[dict[str, Any]]:
    """The labelled (question, sentence) pairs of the fit data (see the module docstring)."""
    from agentrag.sentences import sentences

    out: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(article: str, context: str, qa: dict[str, Any]) -> None:
        if qa["id"] in seen:
            return
        seen.add(qa["id"])
        adversarial = bool(qa.get("is_impossible"))
        answers = qa.get("plausible_answers", []) if adversarial else qa["answers"]
        spans = [(a["answer_start"], a["answer_start"] + len(a["text"])) for a in answers]
        for sentence in sentences(context, language="en"):
            text = sentence.text.strip()
            start = context.find(text)
            if not text or start < 0:
                continue
            end = start + len(text)
            holds = any(start <= a < end or (a <= start < b) for a, b in spans)
            kind = ("adv" if holds else "advother") if adversarial else ("pos" if holds else "other")
            out.append(
                {"q": qa["question"], "s": text, "y": int(kind == "pos"), "kind": kind, "article": article}
            )

    for name in ("train-v2.0-subset.json", "dev-v2.0-subset.json"):
        for article in json.loads((SHARED / "squad2-subset" / name).read_text())["data"]:
            if article["title"] == "Rhine":  # XQuAD-dev article 20: the report half
                continue
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    add(article["title"], paragraph["context"], qa)
    xquad = json.loads((SHARED / "xquad-dev" / "xquad-dev.en.json").read_text())["data"]
    for article in xquad[:12]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                add(article["title"], paragraph["context"], qa)
    return out


def _aucs(items: list[dict[str, Any]], scores: Any, cosines: Any) -> str:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    y = np.array([p["y"] for p in items])
    kind = np.array([p["kind"] for p in items])
    parts = [f"all {roc_auc_score(y, scores):.3f} (cosine {roc_auc_score(y, cosines):.3f})"]
    for other in ("adv", "other"):
        m = np.isin(kind, ["pos", other])
        if len(set(y[m])) > 1:
            reader, cosine = roc_auc_score(y[m], scores[m]), roc_auc_score(y[m], cosines[m])
            parts.append(f"pos vs {other} {reader:.3f} (cosine {cosine:.3f})")
    return ", ".join(parts)


def _minilm() -> Any:
    from agentrag.embedders import DEFAULT_LOCAL_MODEL, _load_onnx

    return _load_onnx(DEFAULT_LOCAL_MODEL, "", "onnx", None)


def cosines(model: Any, items: list[dict[str, Any]]) -> Any:
    """Each pair's cosine, question and sentence embedded alone (as the answer step embeds them)."""
    return (model.encode([p["q"] for p in items], 32) * model.encode([p["s"] for p in items], 32)).sum(1)


def frozen(items: list[dict[str, Any]]) -> None:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    model = _minilm()
    features = []
    for start in range(0, len(items), 32):
        batch = items[start : start + 32]
        encs = [model.tokenizer.encode(p["q"], p["s"]) for p in batch]
        width = min(256, max(len(e.ids) for e in encs))
        feeds = {
            k: np.zeros((len(encs), width), np.int64)
            for k in ("input_ids", "attention_mask", "token_type_ids")
        }
        for i, e in enumerate(encs):
            n = min(width, len(e.ids))
            feeds["input_ids"][i, :n], feeds["token_type_ids"][i, :n] = e.ids[:n], e.type_ids[:n]
            feeds["attention_mask"][i, :n] = 1
        hidden = model.session.run(None, {k: v for k, v in feeds.items() if k in model._inputs})[0]
        for i, e in enumerate(encs):
            n = min(width, len(e.ids))
            types = feeds["token_type_ids"][i, :n]
            q = hidden[i, :n][types == 0].mean(0)
            s = hidden[i, :n][types == 1].mean(0) if (types == 1).any() else q
            q, s = q / np.linalg.norm(q), s / np.linalg.norm(s)
            features.append(np.concatenate([q * s, np.abs(q - s)]))
    x = np.array(features)
    y = np.array([p["y"] for p in items])
    squad = ("Normans", "Computational_complexity_theory")
    titles = sorted({p["article"] for p in items if p["article"] not in squad})
    # the two SQuAD articles alone (XQuAD's Normans with SQuAD's), the other eleven XQuAD ones in three groups
    groups = np.array(
        [p["article"] if p["article"] in squad else f"xquad{titles.index(p['article']) % 3}" for p in items]
    )
    scores = np.zeros(len(items))
    for group in sorted(set(groups)):
        test = groups == group
        fit = LogisticRegression(C=0.1, max_iter=2000, class_weight="balanced").fit(x[~test], y[~test])
        scores[test] = fit.predict_proba(x[test])[:, 1]
    print("frozen, leave-one-group-out:", _aucs(items, scores, cosines(model, items)))


def finetune(items: list[dict[str, Any]], epochs: int) -> None:
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    from agentrag.embedders import bundled_minilm_path

    torch.manual_seed(0)
    random.seed(0)
    path = f"{bundled_minilm_path()}"
    tokenizer, base = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)
    head = torch.nn.Linear(base.config.hidden_size, 1)
    train = [p for p in items if p["article"] not in HELD_OUT]
    test = [p for p in items if p["article"] in HELD_OUT]

    def logits(batch: list[dict[str, Any]]) -> Any:
        enc = tokenizer(
            [p["q"] for p in batch], [p["s"] for p in batch], truncation=True, max_length=128,
            padding=True, return_tensors="pt",
        )  # fmt: skip
        hidden = base(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        return head((hidden * mask).sum(1) / mask.sum(1)).squeeze(-1)

    params = [*base.parameters(), *head.parameters()]
    optimiser = torch.optim.AdamW(params, lr=3e-5, weight_decay=0.01)
    steps = epochs * ((len(train) + 15) // 16)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda k: min(1.0, (k + 1) / (0.1 * steps)) * max(0.0, 1 - k / steps)
    )
    balance = torch.tensor(sum(1 - p["y"] for p in train) / max(1, sum(p["y"] for p in train)))
    loss_of = torch.nn.BCEWithLogitsLoss(pos_weight=balance)
    started = time.perf_counter()
    for epoch in range(epochs):
        base.train()
        order = random.sample(train, len(train))
        for start in range(0, len(order), 16):
            batch = order[start : start + 16]
            loss = loss_of(logits(batch), torch.tensor([float(p["y"]) for p in batch]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
        print(f"epoch {epoch}: {time.perf_counter() - started:.0f} s", flush=True)
    base.eval()
    with torch.no_grad():
        scores = np.array([s for i in range(0, len(test), 64) for s in logits(test[i : i + 64]).tolist()])
    print(
        f"fine-tuned ({len(train)} pairs; held out {', '.join(HELD_OUT)}: {len(test)} pairs):",
        _aucs(test, scores, cosines(_minilm(), test)),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["frozen", "finetune", "both"], default="both")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args(argv)
    items = pairs()
    kinds = {k: sum(p["kind"] == k for p in items) for k in ("pos", "other", "adv", "advother")}
    print(f"{len(items)} pairs: {kinds}")
    if args.mode in ("frozen", "both"):
        frozen(items)
    if args.mode in ("finetune", "both"):
        finetune(items, args.epochs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
