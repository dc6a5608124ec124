"""Training of the confidence model: targets, nested budgets, stages (accelerate), prediction."""
