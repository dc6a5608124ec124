"""Label audits: how often a run's judges are wrong, measured on a stratified sample of its own items.

``sample`` draws the labelling sheet (seeded, stratified by task, dataset and the judge's decision, each
item weighted by its stratum's share of the run); ``score`` reads the labels back and estimates each
judge's population-weighted error, precision and recall with bootstrap intervals; ``page`` writes the
keyboard labelling page. ``elical label-audit`` is the command.
"""
