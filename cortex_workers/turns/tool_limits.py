"""The tool router's limits, from the settings: for a call that runs now (`tool_step`) and for
one whose result comes when its task ends (`parked.poll`)."""

from __future__ import annotations

from ..runtime import Runtime
from ..tools import Limits


def limits(rt: Runtime) -> Limits:
    s = rt.settings
    return Limits(
        default_timeout_s=s.tool_timeout_s,
        max_timeout_s=s.tool_max_timeout_s,
        progress_after_s=s.tool_progress_after_s,
        output_cap=s.tool_output_cap,
        image_max_bytes=s.image_max_bytes,
        images_per_result=s.images_per_message,
    )
