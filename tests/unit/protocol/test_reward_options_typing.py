"""``RewardOptions`` is ``RewardPolicy``'s fields, all optional, with the same types and bounds.

Both classes are plain declarations (what type checkers read is what runs); they share each field's
type alias, and this test keeps the two in step: same fields in order, less the server-only ones,
each the policy's schema or null, unset by default.
"""

from __future__ import annotations

from audio_reward.protocol.reward import SERVER_ONLY_FIELDS, RewardOptions, RewardPolicy


def test_the_options_are_the_policys_fields_in_order_less_the_server_only_ones() -> None:
    expected = [name for name in RewardPolicy.model_fields if name not in SERVER_ONLY_FIELDS]
    assert list(RewardOptions.model_fields) == expected


def test_each_field_is_the_policys_type_and_bounds_or_none_and_defaults_to_none() -> None:
    policy = RewardPolicy.model_json_schema()["properties"]
    options = RewardOptions.model_json_schema()["properties"]
    for name, schema in options.items():
        assert RewardOptions.model_fields[name].default is None, name
        declared = {k: v for k, v in policy[name].items() if k not in ("default", "description", "title")}
        assert schema["anyOf"] == [declared, {"type": "null"}], name
