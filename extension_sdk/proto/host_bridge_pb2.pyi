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

class BridgeRequest(_message.Message):
    __slots__ = ("id", "read_file", "list_files", "write_file", "delete_file", "get_messages", "get_context", "set_context", "send_message", "get_session_info", "traceparent", "tracestate")
    ID_FIELD_NUMBER: _ClassVar[int]
    READ_FILE_FIELD_NUMBER: _ClassVar[int]
    LIST_FILES_FIELD_NUMBER: _ClassVar[int]
    WRITE_FILE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FILE_FIELD_NUMBER: _ClassVar[int]
    GET_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    GET_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SET_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SEND_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GET_SESSION_INFO_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    id: int
    read_file: ReadFileRequest
    list_files: ListFilesRequest
    write_file: WriteFileRequest
    delete_file: DeleteFileRequest
    get_messages: GetMessagesRequest
    get_context: GetContextRequest
    set_context: SetContextRequest
    send_message: SendMessageRequest
    get_session_info: GetSessionInfoRequest
    traceparent: str
    tracestate: str
    def __init__(self, id: _Optional[int] = ..., read_file: _Optional[_Union[ReadFileRequest, _Mapping]] = ..., list_files: _Optional[_Union[ListFilesRequest, _Mapping]] = ..., write_file: _Optional[_Union[WriteFileRequest, _Mapping]] = ..., delete_file: _Optional[_Union[DeleteFileRequest, _Mapping]] = ..., get_messages: _Optional[_Union[GetMessagesRequest, _Mapping]] = ..., get_context: _Optional[_Union[GetContextRequest, _Mapping]] = ..., set_context: _Optional[_Union[SetContextRequest, _Mapping]] = ..., send_message: _Optional[_Union[SendMessageRequest, _Mapping]] = ..., get_session_info: _Optional[_Union[GetSessionInfoRequest, _Mapping]] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class BridgeResponse(_message.Message):
    __slots__ = ("id", "code", "message", "read_file", "list_files", "write_file", "delete_file", "get_messages", "get_context", "set_context", "send_message", "get_session_info")
    ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    READ_FILE_FIELD_NUMBER: _ClassVar[int]
    LIST_FILES_FIELD_NUMBER: _ClassVar[int]
    WRITE_FILE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FILE_FIELD_NUMBER: _ClassVar[int]
    GET_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    GET_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SET_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SEND_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GET_SESSION_INFO_FIELD_NUMBER: _ClassVar[int]
    id: int
    code: int
    message: str
    read_file: ReadFileResponse
    list_files: ListFilesResponse
    write_file: WriteFileResponse
    delete_file: DeleteFileResponse
    get_messages: GetMessagesResponse
    get_context: GetContextResponse
    set_context: SetContextResponse
    send_message: SendMessageResponse
    get_session_info: GetSessionInfoResponse
    def __init__(self, id: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., read_file: _Optional[_Union[ReadFileResponse, _Mapping]] = ..., list_files: _Optional[_Union[ListFilesResponse, _Mapping]] = ..., write_file: _Optional[_Union[WriteFileResponse, _Mapping]] = ..., delete_file: _Optional[_Union[DeleteFileResponse, _Mapping]] = ..., get_messages: _Optional[_Union[GetMessagesResponse, _Mapping]] = ..., get_context: _Optional[_Union[GetContextResponse, _Mapping]] = ..., set_context: _Optional[_Union[SetContextResponse, _Mapping]] = ..., send_message: _Optional[_Union[SendMessageResponse, _Mapping]] = ..., get_session_info: _Optional[_Union[GetSessionInfoResponse, _Mapping]] = ...) -> None: ...
