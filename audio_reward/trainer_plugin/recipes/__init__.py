"""Training recipes (launch plans, launch scripts, data preparation) shipped with the plugin.

Each recipe is a set of command-line overrides on verl-omni's ``omni_trainer``
config, a table in :mod:`.overrides` that :mod:`.launch` renders; ``<recipe>/run.sh`` launches it.
"""

from pathlib import Path

RECIPES_DIR = Path(__file__).resolve().parent
