"""Imported by verl's plugin loader (entry-point group ``verl.plugins``): registers the plugin."""

from . import register_with_verl

REGISTERED = register_with_verl()
