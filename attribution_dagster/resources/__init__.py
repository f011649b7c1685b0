"""Dagster resources: thin, pydantic-configured builders of connectors and sinks.

Adding a connector means adding its client under `connectors/` and one resource here.
"""

from attribution_dagster.resources.clusters import ClustersResource
from attribution_dagster.resources.files import LocalFilesResource
from attribution_dagster.resources.fleet import FleetResource
from attribution_dagster.resources.kueue import KueuePlacementResource
from attribution_dagster.resources.settings import AnalysisSettingsResource
from attribution_dagster.resources.sinks import (
    AssetStoreResource,
    SqlSinkResource,
    StdoutSinkResource,
)
from attribution_dagster.resources.static import StaticCasesResource

__all__ = [
    "AnalysisSettingsResource",
    "AssetStoreResource",
    "ClustersResource",
    "FleetResource",
    "KueuePlacementResource",
    "LocalFilesResource",
    "SqlSinkResource",
    "StaticCasesResource",
    "StdoutSinkResource",
]
