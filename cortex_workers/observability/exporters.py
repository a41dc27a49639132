"""Which span exporters and resource tracing uses, from the standard `OTEL_*` variables:
`OTEL_TRACES_EXPORTER` (`otlp` by default, over `http/protobuf` or `grpc` as the OTLP protocol
variables say; any other name from an installed package's entry point), and the service name
from `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` before the process's own."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SpanExporter

_EXPORTER_GROUP = "opentelemetry_traces_exporter"


def exporter_names(env: Mapping[str, str]) -> list[str] | None:
    """`OTEL_TRACES_EXPORTER` as a list without `none`, or None when it is unset."""
    value = env.get("OTEL_TRACES_EXPORTER", "").strip()
    if not value:
        return None
    names = (name.strip().lower() for name in value.split(","))
    return [name for name in names if name and name != "none"]


def resource(service_name: str) -> Resource:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    from_env = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    named = from_env.attributes.get(SERVICE_NAME)
    if isinstance(named, str) and not named.startswith("unknown_service"):
        return from_env
    return from_env.merge(Resource({SERVICE_NAME: service_name}))


def exporters() -> list[SpanExporter]:
    return [_exporter(name) for name in exporter_names(os.environ) or ["otlp"]]


def _exporter(name: str) -> SpanExporter:
    """The exporter `OTEL_TRACES_EXPORTER` names; `otlp` follows the OTLP protocol variables."""
    if name == "otlp":
        protocol = (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
            or "http/protobuf"
        )
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
        if protocol != "grpc":
            raise ValueError(f"unknown OTLP protocol {protocol!r}: use http/protobuf or grpc")
        name = "otlp_proto_grpc"  # opentelemetry-exporter-otlp-proto-grpc, when installed
    return _exporter_from_entry_point(name)


def _exporter_from_entry_point(name: str) -> SpanExporter:
    from importlib.metadata import entry_points

    from opentelemetry.sdk.trace.export import SpanExporter

    found = entry_points(group=_EXPORTER_GROUP, name=name)
    if not found:
        raise ValueError(
            f"no installed package provides the trace exporter {name!r} named by "
            "OTEL_TRACES_EXPORTER or the OTLP protocol: install it, or use otlp "
            "(http/protobuf) or console"
        )
    exporter = next(iter(found)).load()()
    if not isinstance(exporter, SpanExporter):
        raise ValueError(f"the trace exporter {name!r} is not a SpanExporter")
    return exporter
