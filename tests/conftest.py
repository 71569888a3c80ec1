"""Shared pytest set-up: litellm must not reach for the network at import."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
