"""SuperQUAIL: a target-aware release that spends budget on what a classifier needs (``--method superquail``).

After Rosenblatt, Allen and Stoyanovich, "Spending Privacy Budget Wisely and Fairly", Algorithm 2 (SuperQUAIL),
on our own synthesizer and DP classifiers:

1. Budget: ``--alpha`` of the run's rho goes to DPSAGE, i.e. the base synthesizer (dpsyn, given
   superquail_synth_share of it through ``PrivateTable.holding``) and the target's classifier (the rest);
   the other 1 - alpha is split equally between the ``--beta`` feature classifiers.
2. DP classifiers.  The target's (``--classifier logistic``, default): a multinomial logistic
   regression on every other column's one-hot codes, with ``--sensitive`` among its features: exact
   gradient descent on the base synthesizer's records (free), then noisy steps on the private rows,
   each one Gaussian measurement of the loss's gradient sums (``LogisticGradients``, sensitivity
   theta × sqrt(2 × (columns + 1))).  Feature classifiers (and the target's with
   ``--classifier nb``): naive Bayes models whose tables are noisy 2-way
   marginals (label × each other column; for the target with ``--sensitive``, 3-way label × column
   × sensitive: one model per group), the classifier's rho split equally between its marginals;
   negative noisy counts become 0 and every cell gets one pseudo-count (post-processing).
3. DPSAGE: the SAGE values (Covert et al.: permutation estimator, cross-entropy loss) of the
   target's classifier, computed on up to superquail_sage_rows records of the DP synthetic data.  Both
   classifiers' log-odds add up over columns; a column outside the subset is left out (naive
   Bayes: exactly the model averaged over it) or held at its mean contribution over the synthetic
   records (logistic).  Post-processing of DP outputs: free.  With ``--sensitive``, one ranking per
   group, merged round-robin (the smallest group, by the noisy counts (naive Bayes) or the synthetic
   records (logistic), taken last in each round, first in a last partial round).
4. Sample step: every synthetic record gets its top-beta features and its target replaced, the
   classifiers visited in an order drawn per record: a feature by a draw from its classifier's
   posterior (keeping its distribution; the paper replaces by the prediction), the target by the
   prediction where the classifier gives it probability superquail_confidence or more (elsewhere the base
   synthesizer's label stays: the paper replaces every label, which lost to a strong synthesizer),
   or, with ``--fair``, in every record (the paper's), at per-group thresholds tuned on the base
   synthetic records (post-processing):
   ``bal`` equalises the groups' false-negative rates at the overall rate, as expected if the
   labels followed the classifier's probabilities (the base records' own labels are noisiest in
   the smallest groups, and measured against them the gaps halved less), ``fnr`` lowers the
   smallest group's threshold until its false-negative rate is the lowest one within two points
   of its accuracy.

The positive class of the target is its last schema value (as ``main.py score`` takes it).
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from dpsyn.lib.privacy.accounting import eps_from_rho_delta
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import LogisticGradients, Marginal, DomainRecords
from dpsyn.lib.tuning import T
from dpsyn.method import dpsyn
from dpsyn.method.base import Method, PublicData, RunContext, SynthesisResult, option

log = logging.getLogger("dpsyn")

FAIR_CHOICES = ("none", "bal", "fnr")
CLASSIFIERS = ("logistic", "nb")


@dataclass(frozen=True)
class SuperquailOptions:
    target: str | None = option(None, "superquail (required) / rap: categorical label column to predict")
    sensitive: str | None = option(None, "superquail: categorical column whose groups get their own feature "
                                         "rankings and classifiers (needed by --fair)")
    fair: str = option("none", "superquail: none; bal (equal false-negative rates across --sensitive groups); fnr "
                               "(lowest false-negative rate for the smallest group)", choices=FAIR_CHOICES)
    alpha: float = option(0.7, "superquail: share of the budget for the base synthesizer and the target's "
                                 "classifier; the rest goes to the feature classifiers", type=float, expert=True)
    beta: int = option(0, "superquail: features resampled by their own DP classifiers", type=int, minimum=0, expert=True)
    classifier: str = option("logistic", "superquail: the target's DP classifier: logistic (noisy gradient "
                                         "descent) or nb (naive Bayes on noisy 2-way marginals)",
                             choices=CLASSIFIERS)


def check(options: SuperquailOptions, schema) -> list[str]:
    """What the schema cannot honour, one line each (before any data is read)."""
    problems = []
    for flag, name in (("--target", options.target), ("--sensitive", options.sensitive)):
        if name is None:
            continue
        if name not in schema.names:
            problems.append(f"{flag} {name}: not a schema column")
        elif schema.column(name).values is None:
            problems.append(f"{flag} {name} must be a categorical column")
    if options.target is None:
        problems.append("--method superquail needs --target COLUMN (the categorical column to predict)")
    elif options.target == options.sensitive:
        problems.append("--sensitive must differ from --target")
    if options.fair != "none" and options.sensitive is None:
        problems.append(f"--fair {options.fair} needs --sensitive COLUMN")
    if options.fair != "none" and options.target in schema.names and schema.column(options.target).values is not None \
            and len(schema.column(options.target).values) != 2:
        problems.append(f"--fair {options.fair} needs a two-valued --target (false negatives of its last value); "
                        f"{options.target} has {len(schema.column(options.target).values)} values")
    if not 0 < options.alpha < 1:
        problems.append(f"--alpha must be in (0, 1), got {options.alpha}")
    return problems


@dataclass
class AdditiveModel:
    """A classifier whose log-odds add up over columns: ``prior[g]`` (labels) plus ``terms[j][g]``
    (values × labels) for each column j, per group of the sensitive column (one group, index 0,
    without one).  Naive Bayes: log P(label) and log P(value | label); a logistic regression: its
    intercept and coefficients (see ``fit_logistic``)."""

    label: int
    columns: list[int]
    prior: np.ndarray                  # groups × labels
    terms: dict[int, np.ndarray]       # column -> groups × values × labels

    def log_posterior(self, codes: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """n × labels normalised log P(label | the model's columns); ``groups`` (each row's sensitive
        group) matter only to a model with one table per group."""
        groups = groups if len(self.prior) > 1 else np.zeros(len(codes), dtype=np.int64)
        out = self.prior[groups].copy()
        for j in self.columns:
            out += self.terms[j][groups, codes[:, j]]
        return out - np.logaddexp.reduce(out, axis=1, keepdims=True)


def _fit(private: PrivateTable, ctx: RunContext, label: int, columns: list[int], sensitive: int | None,
         rho: float, what: str) -> tuple[AdditiveModel, np.ndarray | None]:
    """A naive Bayes classifier of column ``label`` from ``columns``, each table a noisy marginal
    (label × column, × sensitive when given).  Privacy cost: ``rho``, split equally.  Also returns
    the noisy group sizes of the sensitive column (mean over the marginals) or None."""
    names, sizes = ctx.domain.names, ctx.domain.sizes
    groups = sizes[sensitive] if sensitive is not None else 1
    terms, priors, group_sizes = {}, [], []
    for j in columns:
        attrs = (names[label], names[j]) + ((names[sensitive],) if sensitive is not None else ())
        noisy = private.measure(Marginal(attrs), rho / len(columns), f"superquail: {what}: {' × '.join(attrs)}").noisy
        counts = np.clip(np.asarray(noisy, dtype=np.float64), 0, None).reshape(sizes[label], sizes[j], groups)
        counts = counts.transpose(2, 1, 0) + T.superquail_pseudo_count  # groups × values × labels
        terms[j] = np.log(counts / counts.sum(axis=1, keepdims=True))
        priors.append(counts.sum(axis=1))
        group_sizes.append(counts.sum(axis=(1, 2)))
    prior = np.mean(priors, axis=0) if priors else np.ones((groups, sizes[label]))
    return (AdditiveModel(label, list(columns), np.log(prior / prior.sum(axis=1, keepdims=True)), terms),
            np.mean(group_sizes, axis=0) if sensitive is not None and group_sizes else None)


def fit_logistic(private: PrivateTable, ctx: RunContext, label: int, columns: list[int], rho: float,
                 codes: np.ndarray, steps: int | None = None) -> AdditiveModel:
    """A multinomial logistic regression of column ``label`` on the one-hot codes of ``columns``.
    Every step moves by rate / (columns + 1) × (gradient / rows + superquail_l2 × W), divided per feature by its
    share of the synthetic records ``codes`` (floored at superquail_frequency_floor): a damped diagonal Newton
    step for one-hot features, rows being the synthetic records' count.  The rate is the one of superquail_rates
    whose first ``steps`` exact steps from zero reach the lowest loss on the synthetic records; the
    start is where superquail_warm_steps exact steps at that rate lead (all of this post-processing: free);
    then ``steps`` noisy ones, each measuring the gradient sums at the current weights on the private rows
    (LogisticGradients, rho / steps each).  Privacy cost: ``rho``.  Returned as an additive model
    whose terms are centred on the synthetic codes' average, so that leaving a column out (DPSAGE)
    stands for its mean contribution."""
    steps = T.superquail_logistic_steps if steps is None else steps  # defaults: the tuning table's, read now
    warm_steps = T.superquail_warm_steps
    domain = ctx.domain
    names = tuple(domain.names[j] for j in columns)
    sizes = [domain.sizes[j] for j in columns]
    frequencies = {j: np.bincount(codes[:, j], minlength=domain.sizes[j]) / max(len(codes), 1) for j in columns}
    scale = np.concatenate([[1.0]] + [np.maximum(frequencies[j], T.superquail_frequency_floor) for j in columns])
    synthetic, everyone = DomainRecords(codes, {}, domain), np.zeros(len(codes), dtype=np.int64)
    starts = 1 + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)

    def model(weights: np.ndarray) -> AdditiveModel:
        terms, prior = {}, weights[:, 0].copy()
        for j, start, size in zip(columns, starts, sizes):
            table = weights[:, start:start + size].T  # values × labels
            mean = frequencies[j] @ table / max(frequencies[j].sum(), 1e-12)
            terms[j] = (table - mean)[None]
            prior += mean
        return AdditiveModel(label, list(columns), prior[None], terms)

    def loss(weights: np.ndarray) -> float:
        """Regularised cross-entropy on the synthetic records (inf where a step size diverged)."""
        log_p = model(weights).log_posterior(codes, everyone)[np.arange(len(codes)), codes[:, label]]
        value = float(-log_p.mean() + T.superquail_l2 / 2 * (weights ** 2).sum()) if len(codes) else 0.0
        return value if np.isfinite(value) else np.inf

    def gradients(weights: np.ndarray) -> LogisticGradients:
        return LogisticGradients(names, domain.names[label], tuple(tuple(float(v) for v in w) for w in weights))

    def step(weights: np.ndarray, sums: np.ndarray, rate: float) -> np.ndarray:
        gradient = np.asarray(sums, dtype=np.float64) / max(len(codes), 1) + T.superquail_l2 * weights
        return weights - rate / (len(columns) + 1) * gradient / scale

    def descend(weights: np.ndarray, rate: float, count: int) -> np.ndarray:
        for _ in range(count):
            weights = step(weights, gradients(weights).answer(synthetic), rate)
        return weights

    zero = np.zeros((domain.sizes[label], len(scale)))
    trials = {rate: descend(zero, rate, min(steps, warm_steps)) for rate in T.superquail_rates}
    rate = min(T.superquail_rates, key=lambda r: loss(trials[r]))  # ties: the largest
    weights = descend(trials[rate], rate, warm_steps - min(steps, warm_steps))
    log.info("superquail: target classifier steps at rate %g (the lowest loss on the synthetic records)", rate)
    for k in range(steps):
        step_name = f"superquail: target classifier: gradient step {k + 1}"
        noisy = private.measure(gradients(weights), rho / steps, step_name)
        weights = step(weights, noisy.noisy, rate)
    return model(weights)


def sage_values(model: AdditiveModel, codes: np.ndarray, groups: np.ndarray, rng: np.random.Generator,
                permutations: int | None = None) -> dict[int, float]:
    """SAGE value of each of the model's columns on ``codes`` (labels from the records themselves):
    the mean drop in cross-entropy when the column joins a random subset of the others (permutation
    estimator over ``permutations``, default superquail_sage_permutations), a column outside the subset
    marginalised by leaving its term out."""
    permutations = T.superquail_sage_permutations if permutations is None else permutations
    if not model.columns or not len(codes):
        return {j: 0.0 for j in model.columns}
    labels = codes[:, model.label]
    groups = groups if len(model.prior) > 1 else np.zeros(len(codes), dtype=np.int64)
    values = {j: 0.0 for j in model.columns}
    rows = np.arange(len(codes))
    for _ in range(permutations):
        logits = model.prior[groups].copy()
        loss = -np.mean((logits - np.logaddexp.reduce(logits, axis=1, keepdims=True))[rows, labels])
        for j in rng.permutation(model.columns):
            logits += model.terms[j][groups, codes[:, j]]
            after = -np.mean((logits - np.logaddexp.reduce(logits, axis=1, keepdims=True))[rows, labels])
            values[j] += (loss - after) / permutations
            loss = after
    return values


def merge_rankings(rankings: list[list[int]], protected: int, count: int) -> list[int]:
    """``count`` columns taken round-robin from per-group ``rankings`` (best first), skipping ones
    already taken: each round visits the groups with ``protected`` last, except a last partial round,
    which starts with it (the paper's preference for the protected group)."""
    chosen: list[int] = []
    position = [0] * len(rankings)
    available = set(j for r in rankings for j in r)
    while len(chosen) < min(count, len(available)):
        others = [g for g in range(len(rankings)) if g != protected]
        order = [protected] + others if count - len(chosen) < len(rankings) else others + [protected]
        for g in order:
            while position[g] < len(rankings[g]) and rankings[g][position[g]] in chosen:
                position[g] += 1
            if position[g] < len(rankings[g]) and len(chosen) < count:
                chosen.append(rankings[g][position[g]])
                position[g] += 1
    return chosen


def _false_negative_rate(truth: np.ndarray, predicted: np.ndarray) -> float:
    return float((~predicted[truth]).mean()) if truth.any() else 0.0


def _expected_false_negative_rate(probability: np.ndarray, threshold: float) -> float:
    """The false-negative rate at ``threshold`` if each record's label were drawn from ``probability``."""
    return float((probability * (probability < threshold)).sum() / max(probability.sum(), 1e-12))


def tune_thresholds(probability: np.ndarray, truth: np.ndarray, groups: np.ndarray, fair: str,
                    protected: int, n_groups: int) -> np.ndarray:
    """Per-group thresholds on the positive class's probability (see the module doc); 1/2 for every
    group when ``fair`` is none.  ``bal`` equalises expected false-negative rates under the
    classifier's own probabilities; ``fnr`` is tuned on records whose labels are ``truth`` (booleans)."""
    thresholds = np.full(n_groups, 0.5)
    if fair == "none":
        return thresholds
    grid = np.linspace(0.05, 0.95, 91)
    if fair == "bal":
        overall = _expected_false_negative_rate(probability, 0.5)
        for g in range(n_groups):
            rows = groups == g
            if rows.any():
                gaps = [abs(_expected_false_negative_rate(probability[rows], t) - overall) for t in grid]
                thresholds[g] = grid[int(np.argmin(gaps))]
        return thresholds
    rows = groups == protected
    base = float(((probability[rows] >= 0.5) == truth[rows]).mean()) if rows.any() else 0.0
    best = (_false_negative_rate(truth[rows], probability[rows] >= 0.5), -0.5)  # ties: the higher threshold
    for t in grid:
        predicted = probability[rows] >= t
        if float((predicted == truth[rows]).mean()) >= base - T.superquail_accuracy_slack:
            best = min(best, (_false_negative_rate(truth[rows], predicted), -t))
    thresholds[protected] = -best[1]
    return thresholds


def synthesize(private: PrivateTable, public: PublicData | None, ctx: RunContext,
               options: SuperquailOptions) -> SynthesisResult:
    """Synthetic codes (see the module doc).  Privacy cost: exactly what remains of the run's budget:
    ``alpha`` × superquail_synth_share to dpsyn, ``alpha`` × (1 - superquail_synth_share) to the target's classifier, the
    rest in equal shares to the ``beta`` feature classifiers (all of it to DPSAGE when beta is 0)."""
    domain = ctx.domain
    rho = private.remaining
    assert options.target is not None, "settings.py refuses superquail without a target"
    target = domain.index(options.target)
    sensitive = domain.index(options.sensitive) if options.sensitive is not None else None
    fixed = set(domain.indices(ctx.group_columns)) | set(domain.indices(ctx.skip)) | {target}
    if sensitive is not None:
        fixed.add(sensitive)
    candidates = [j for j in range(len(domain.names)) if j not in fixed]
    predictors = [j for j in range(len(domain.names)) if j != target and j != sensitive
                  and domain.names[j] not in ctx.skip]
    beta = min(options.beta, len(candidates))
    sage_share = options.alpha if beta else 1.0
    synth_rho = sage_share * T.superquail_synth_share * rho
    target_rho = sage_share * (1 - T.superquail_synth_share) * rho

    with private.holding(rho - synth_rho):
        synth_ctx = dataclasses.replace(ctx, epsilon=eps_from_rho_delta(synth_rho, ctx.delta))
        log.info("superquail: base synthesizer dpsyn on %.0f%% of rho (eps %.3g alone)", 100 * synth_rho / rho,
                 synth_ctx.epsilon)
        codes = dpsyn.synthesize(private, public, synth_ctx, dpsyn.DpsynOptions()).codes.copy()

    with ctx.timed("classifiers"):
        groups = codes[:, sensitive] if sensitive is not None else np.zeros(len(codes), dtype=np.int64)
        n_groups = domain.sizes[sensitive] if sensitive is not None else 1
        if options.classifier == "nb":
            model, group_sizes = _fit(private, ctx, target, predictors, sensitive, target_rho, "target classifier")
            protected = int(np.argmin(group_sizes)) if group_sizes is not None else 0
        else:
            features = predictors + ([sensitive] if sensitive is not None else [])
            model = fit_logistic(private, ctx, target, features, target_rho, codes)
            protected = int(np.argmin(np.bincount(groups, minlength=n_groups)))  # by the synthetic records
        sample = ctx.rng.choice(len(codes), min(T.superquail_sage_rows, len(codes)), replace=False)
        rankings = []
        for g in range(n_groups):
            rows = sample[groups[sample] == g]
            values = sage_values(model, codes[rows], groups[rows], ctx.rng)
            rankings.append(sorted(candidates, key=lambda j: -values[j]))
            if n_groups > 1:
                log.info("superquail: DPSAGE ranking for %s=%d: %s", options.sensitive, g,
                         ", ".join(domain.names[j] for j in rankings[-1][:5]))
        chosen = merge_rankings(rankings, protected, beta) if n_groups > 1 else rankings[0][:beta]
        log.info("superquail: features resampled by their own classifiers: %s",
                 ", ".join(domain.names[j] for j in chosen) or "none")
        feature_models = [_fit(private, ctx, j, [k for k in range(len(domain.names)) if k != j
                                                 and domain.names[k] not in ctx.skip],
                               None, (rho - synth_rho - target_rho) / beta, f"classifier of {domain.names[j]}")[0]
                          for j in chosen]

    with ctx.timed("sampling"):
        probability = np.exp(model.log_posterior(codes, groups)[:, -1])
        truth = codes[:, target] == domain.sizes[target] - 1
        thresholds = tune_thresholds(probability, truth, groups, options.fair, protected, n_groups)
        if options.fair != "none":
            log.info("superquail: fair=%s thresholds on P(%s = positive) per %s: %s", options.fair,
                     options.target, options.sensitive, ", ".join(f"{t:.2f}" for t in thresholds))
        order = np.argsort(ctx.rng.random((len(codes), len(chosen) + 1)), axis=1)
        models = feature_models + [model]
        predicted = 0  # records whose target became the classifier's prediction
        for step in range(len(models)):
            for m, classifier in enumerate(models):
                rows = np.flatnonzero(order[:, step] == m)
                if not len(rows):
                    continue
                posterior = np.exp(classifier.log_posterior(codes[rows], groups[rows]))
                if classifier is model:
                    if options.fair == "none":  # where the classifier is unsure, the synthesizer's label stays
                        sure = posterior.max(axis=1) >= T.superquail_confidence
                        rows, posterior = rows[sure], posterior[sure]
                    predicted += len(rows)
                    if domain.sizes[target] == 2:
                        codes[rows, target] = posterior[:, 1] >= thresholds[groups[rows]]
                    else:
                        codes[rows, target] = posterior.argmax(axis=1)
                else:
                    cdf = np.cumsum(posterior, axis=1)
                    u = ctx.rng.random(len(rows))[:, None] * cdf[:, -1:]
                    codes[rows, classifier.label] = np.minimum((cdf < u).sum(axis=1), posterior.shape[1] - 1)
        if options.fair == "none":
            log.info("superquail: %s set to the classifier's prediction in %.0f%% of the records (where it is at "
                     "least %.0f%% sure; the synthesizer's label elsewhere)", options.target,
                     100 * predicted / max(len(codes), 1), 100 * T.superquail_confidence)
    return SynthesisResult(codes)


METHOD = Method("superquail", "SuperQUAIL: dpsyn records whose target and most important features are redrawn "
                "by DP classifiers (--target; --sensitive, --fair for fair variants)", synthesize,
                SuperquailOptions, check)
