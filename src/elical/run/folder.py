"""The run folder of `elical run`: every path in it, named once.

Steps, the report, the CLI and the label audit take their paths from a :class:`RunFolder` instead of
joining ``records/…`` or ``models/<key>/model`` by hand, so the layout lives in one place (the README's
"Run folder" section shows it). It imports only base modules, so the audit (a lower layer) uses it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elical.core.fingerprint import SETTINGS_DIR
from elical.model.key import ModelKey

AUDIT_DIR = "audit"  # also the name of an audit folder given for record files (elical.audit)


@dataclass(frozen=True)
class RunFolder:
    """The paths of one run folder (nothing is created or checked here)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # ------------------------------------------------------------------ annotate
    @property
    def config(self) -> Path:
        """The resolved RunConfig of the last invocation."""
        return self.root / "config.yaml"

    @property
    def annotate(self) -> Path:
        """Annotation shards, judge cache and the annotated records.parquet."""
        return self.root / "annotate"

    @property
    def records(self) -> Path:
        """Records per dataset and split, the calibration pool and the evaluation records."""
        return self.root / "records"

    @property
    def pool(self) -> Path:
        """The calibration pool: training-split records that did not fail."""
        return self.records / "train.parquet"

    @property
    def evaluation_records(self) -> Path:
        """Every record outside the training split (failed ones included)."""
        return self.records / "eval.parquet"

    def dataset_records(self, dataset: str, split: str) -> Path:
        """The records of one dataset and split."""
        return self.records / f"{dataset}_{split}.parquet"

    # ------------------------------------------------------------------ train
    @property
    def models(self) -> Path:
        """One training folder per planned model."""
        return self.root / "models"

    def model(self, key: ModelKey) -> Path:
        """The training folder of one model (stages, train_summary.json, model/)."""
        return self.models / key.name

    def weights(self, key: ModelKey) -> Path:
        """The trained confidence model of ``key`` (what `elical predict` and `serve` load)."""
        return self.model(key) / "model"

    @property
    def scores(self) -> Path:
        """One prediction file per trained model, on the evaluation records."""
        return self.root / "scores"

    def score_file(self, key: ModelKey) -> Path:
        """The predictions of ``key``'s model on the evaluation records."""
        return self.scores / f"{key.name}.parquet"

    # ------------------------------------------------------------------ optional steps, audit, settings
    @property
    def stage2_selection(self) -> Path:
        """With ``train.select_on: ood-holdout``: the stage-2 recipe chosen, its scores and the datasets."""
        return self.root / "stage2_selection.json"

    @property
    def honesty(self) -> Path:
        """The honesty step's folder (tables, answers, gate.json, adapters)."""
        return self.root / "honesty"

    @property
    def honesty_info(self) -> Path:
        """How the honesty step was made (gate model, tau, counts); written last."""
        return self.honesty / "run_honesty.json"

    @property
    def honesty_table(self) -> Path:
        """The honesty comparison table."""
        return self.honesty / "honesty_comparison.csv"

    @property
    def retrieval(self) -> Path:
        """The retrieval step's folder (answers, curves, index/, the report's tables)."""
        return self.root / "retrieval"

    @property
    def retrieval_summary(self) -> Path:
        """How the retrieval step was made; written last."""
        return self.retrieval / "summary.json"

    @property
    def settings(self) -> Path:
        """What decided each step's outputs: settings/<step>.json (elical.core.fingerprint)."""
        return self.root / SETTINGS_DIR

    @property
    def audit(self) -> Path:
        """Written by `elical label-audit <run>`: the labelling sheet, page and judges' quality."""
        return self.root / AUDIT_DIR

    # ------------------------------------------------------------------ report
    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def metrics_csv(self) -> Path:
        """The evaluation table (per method, dataset, group, with intervals)."""
        return self.root / "metrics.csv"

    @property
    def results_csv(self) -> Path:
        """method, budget, seed, split, metric, value: one row per seed."""
        return self.root / "results.csv"

    @property
    def summary_csv(self) -> Path:
        """Mean and spread over seeds."""
        return self.root / "summary.csv"

    @property
    def differences_csv(self) -> Path:
        """Paired differences of EliCal against Cal-Only and the best training-free method."""
        return self.root / "differences.csv"

    @property
    def label_strategies_csv(self) -> Path:
        """With several label selection strategies: AUROC per strategy, method and budget, with the paired
        difference against random (run/label_strategies.py)."""
        return self.root / "label_strategies.csv"

    @property
    def table2(self) -> Path:
        return self.root / "table2.md"

    @property
    def exposure_csv(self) -> Path:
        return self.root / "consistency_by_exposure.csv"

    @property
    def findings(self) -> Path:
        return self.root / "findings.json"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def timings(self) -> Path:
        """Wall and CPU seconds per step (run/timings.py)."""
        return self.root / "timings.json"
