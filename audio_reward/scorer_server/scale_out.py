"""How the scorer scales out on Ray Serve: replicas, what each holds, when the autoscaler acts.

A typed model of its own (flags ``--min-replicas``... generated from it), so
``audio-reward serve --ray`` and ``python -m audio_reward.scorer_server.ray_serve``
read the same flags without importing Ray or each other.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from audio_reward.settings_flags import Flag, add_flags, flags_for, values_from_args


class ScaleOutConfig(BaseModel):
    """How many replicas, what each one holds, and when the autoscaler acts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    address: str | None = Field(None, description="Ray cluster address (unset: start or join a local one).")
    min_replicas: int = Field(1, description="Fewest replicas (0 < min_replicas <= max_replicas).")
    max_replicas: int = Field(1, description="Most replicas.")
    initial_replicas: int | None = Field(None, ge=0, description="Replicas at start (unset: Ray's choice).")
    gpus_per_replica: float = Field(1.0, ge=0, description="GPUs each replica reserves (0 for CPU replicas).")
    cpus_per_replica: float = Field(1.0, ge=0, description="CPUs each replica reserves.")
    target_ongoing_requests: float = Field(
        32.0, gt=0,
        description="Requests in flight per replica the autoscaler aims for; about two micro-batches keeps a GPU busy.")
    max_ongoing_requests: int = Field(
        256, ge=1, description="Most requests in flight per replica; more wait at Ray's proxy.")
    upscale_delay_s: float = Field(10.0, ge=0, description="How long load stays high before a replica is added.")
    downscale_delay_s: float = Field(120.0, ge=0, description="How long load stays low before a replica goes.")
    extra_actor_options: dict[str, Any] = Field(default_factory=dict,
                                                description="More ray_actor_options (Python only).")

    @model_validator(mode="after")
    def _replica_range(self) -> ScaleOutConfig:
        if not 0 < self.min_replicas <= self.max_replicas:
            raise ValueError("need 0 < min_replicas <= max_replicas")
        return self

    def deployment_options(self) -> dict[str, Any]:
        """Keyword arguments for ``serve.deployment(...).options``."""
        actor: dict[str, Any] = {"num_cpus": self.cpus_per_replica, **self.extra_actor_options}
        if self.gpus_per_replica:
            actor["num_gpus"] = self.gpus_per_replica
        # Ray's autoscaling_config keys are these fields' names; initial_replicas only when set.
        autoscaling = self.model_dump(include={"min_replicas", "max_replicas", "initial_replicas",
                                               "target_ongoing_requests", "upscale_delay_s", "downscale_delay_s"},
                                      exclude_none=True)
        options: dict[str, Any] = {"ray_actor_options": actor, "max_ongoing_requests": self.max_ongoing_requests}
        if self.min_replicas == self.max_replicas:
            options["num_replicas"] = self.min_replicas
        else:
            options["autoscaling_config"] = autoscaling
        return options


def scale_out_flags() -> list[Flag]:
    return flags_for(ScaleOutConfig, skip=("extra_actor_options",))


def add_scale_out_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add_flags(parser, scale_out_flags())


def scale_out_from_args(args: argparse.Namespace) -> ScaleOutConfig:
    """The scale-out flags given, over the model's defaults; ValidationError when one is out of bounds."""
    return ScaleOutConfig(**values_from_args(args, scale_out_flags()))
