"""What every check needs: the manifest, the rows being filled, a channel to the extension and its Describe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import grpc

from extension_sdk.proto import TOKEN_METADATA_KEY, extension_pb2_grpc
from extension_sdk.proto import extension_pb2 as pb

from ..extensions._manifest import Manifest
from ._report import Results

CHECK_TIMEOUT_CAP_S = 15.0  # no single wait of the kit lasts longer, whatever the manifest's timeouts say


@dataclass
class Kit:
    """The extension under test, reached over one gRPC channel with its token."""

    manifest: Manifest
    results: Results
    channel: grpc.aio.Channel
    token: str
    tool_inputs: dict[str, Any] = field(default_factory=dict)
    describe: pb.DescribeResponse | None = None

    @property
    def stub(self) -> extension_pb2_grpc.ExtensionStub:
        return extension_pb2_grpc.ExtensionStub(self.channel)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((TOKEN_METADATA_KEY, self.token),)

    @property
    def hooks(self) -> list[str]:
        return list(self.describe.hooks) if self.describe is not None else []

    @property
    def features(self) -> list[str]:
        return list(self.describe.features) if self.describe is not None else []

    @property
    def decisions(self) -> bool:
        return self.manifest.hook_policy("beforeToolCall").decisions

    def hook_timeout_s(self, hook: str) -> float:
        return min(self.manifest.hook_timeout_s(hook), CHECK_TIMEOUT_CAP_S)

    @property
    def tool_timeout_s(self) -> float:
        return min(self.manifest.timeouts.tool_ms / 1000, CHECK_TIMEOUT_CAP_S)

    def tool_names(self) -> list[str]:
        return [t.name for t in self.describe.tools] if self.describe is not None else []
