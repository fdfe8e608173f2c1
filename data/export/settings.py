"""Settings of a taskset's export (`[export]`): name, parts, formats, split, licences, where
it is published."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator

from data.export.splits import DEFAULT_EVAL_SHARE
from data.settings import Settings

if TYPE_CHECKING:
    from data.export.dataset_card import Licensing


class ExportConfig(Settings):
    name: str = "docqa"
    rows_per_part: int = Field(default=50_000, ge=1)
    # trainer projections written with each export (`data.export.projections.REGISTERED`)
    formats: list[str] = Field(default_factory=list)
    # of the groups of related tasks, the share drawn to the eval split (data/export/splits.py); a
    # group keeps the side it was first drawn to, whatever this says later
    eval_share: float = Field(default=DEFAULT_EVAL_SHARE, ge=0, le=1)
    # a taskset of fewer tasks comes with its explanation (data/review/diagnosis.py): where the
    # material was lost and what would most likely change it
    explain_below: int = Field(default=10, ge=0)
    # the licence the card declares for the taskset: a Hub licence id (`unknown` until a person
    # states one; `other` with `license_name` and `license_link`)
    license: str = "unknown"
    license_name: str = ""
    license_link: str = ""
    # each source's licence, by its root as the card lists it: a document folder's name, a
    # trace or world file's name, a repository's origin (`data.public_names.source_root`)
    source_licenses: dict[str, str] = Field(default_factory=dict)
    # where each new version is published whole (`data.export.publish`): an fsspec URL or a folder,
    # `hf://datasets/OWNER/NAME` for the Hub; empty: not published
    publish_to: str = ""

    @field_validator("license")
    @classmethod
    def _hub_license(cls, license: str) -> str:
        from data.export.dataset_card import HUB_LICENSES  # the card's module reads these settings

        if license not in HUB_LICENSES:
            raise ValueError(
                f"{license!r} is not a Hub licence id; use one of"
                " https://huggingface.co/docs/hub/repositories-licenses, or `other` with"
                " license_name and license_link"
            )
        return license

    @model_validator(mode="after")
    def _other_license_named(self) -> ExportConfig:
        if self.license == "other" and not (self.license_name and self.license_link):
            raise ValueError("license = 'other' needs license_name and license_link")
        return self

    def licensing(self) -> Licensing:
        """What the card declares of the licences."""
        from data.export.dataset_card import Licensing

        return Licensing(
            self.license, self.license_name, self.license_link, dict(self.source_licenses)
        )

    @field_validator("formats")
    @classmethod
    def _registered(cls, formats: list[str]) -> list[str]:
        from data.export.projections import formats as registered  # it reads this module's settings

        unknown = [f for f in formats if f not in registered()]
        if unknown:
            raise ValueError(
                f"unknown format {unknown[0]!r}; choose from {', '.join(registered())}"
            )
        return formats
