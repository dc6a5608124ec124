"""elical: calibrated, annotation-efficient confidence for large language models."""

__version__ = "0.1.0"
