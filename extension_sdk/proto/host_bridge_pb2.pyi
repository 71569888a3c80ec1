from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadFileRequest(_message.Message):
    __slots__ = ("session_id", "path")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    path: str
    def __init__(self, session_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class ReadFileResponse(_message.Message):
    __slots__ = ("content", "missing")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    content: bytes
    missing: bool
    def __init__(self, content: _Optional[bytes] = ..., missing: _Optional[bool] = ...) -> None: ...

class WriteFileRequest(_message.Message):
    __slots__ = ("session_id", "path", "content", "append")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    path: str
    content: bytes
    append: bool
    def __init__(self, session_id: _Optional[str] = ..., path: _Optional[str] = ..., content: _Optional[bytes] = ..., append: _Optional[bool] = ...) -> None: ...

class WriteFileResponse(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: _Optional[int] = ...) -> None: ...

class DeleteFileRequest(_message.Message):
    __slots__ = ("session_id", "path")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    path: str
    def __init__(self, session_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class DeleteFileResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class ListFilesRequest(_message.Message):
    __slots__ = ("session_id", "path")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    path: str
    def __init__(self, session_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class FileEntry(_message.Message):
    __slots__ = ("path", "is_dir", "size")
    PATH_FIELD_NUMBER: _ClassVar[int]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    path: str
    is_dir: bool
    size: int
    def __init__(self, path: _Optional[str] = ..., is_dir: _Optional[bool] = ..., size: _Optional[int] = ...) -> None: ...

class ListFilesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[FileEntry, _Mapping]]] = ...) -> None: ...

class GetMessagesRequest(_message.Message):
    __slots__ = ("session_id", "limit", "limited")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIMITED_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    limit: int
    limited: bool
    def __init__(self, session_id: _Optional[str] = ..., limit: _Optional[int] = ..., limited: _Optional[bool] = ...) -> None: ...

class GetMessagesResponse(_message.Message):
    __slots__ = ("messages_json",)
    MESSAGES_JSON_FIELD_NUMBER: _ClassVar[int]
    messages_json: str
    def __init__(self, messages_json: _Optional[str] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("session_id", "label")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    label: str
    def __init__(self, session_id: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: str
    def __init__(self, content: _Optional[str] = ...) -> None: ...

class SetContextRequest(_message.Message):
    __slots__ = ("session_id", "label", "content")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    label: str
    content: str
    def __init__(self, session_id: _Optional[str] = ..., label: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class SetContextResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("session_id", "text", "role")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    text: str
    role: str
    def __init__(self, session_id: _Optional[str] = ..., text: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("message_id",)
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    def __init__(self, message_id: _Optional[str] = ...) -> None: ...

class GetSessionInfoRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionInfoResponse(_message.Message):
    __slots__ = ("session_id", "message_count", "model_id", "metadata_json")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    message_count: int
    model_id: str
    metadata_json: str
    def __init__(self, session_id: _Optional[str] = ..., message_count: _Optional[int] = ..., model_id: _Optional[str] = ..., metadata_json: _Optional[str] = ...) -> None: ...
