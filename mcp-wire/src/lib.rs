#![doc = include_str!("../README.md")]

mod capabilities;
mod completion;
mod content;
mod elicitation;
mod encode;
mod error;
mod error_object;
pub mod events;
pub mod header;
mod id;
mod implementation;
mod lifecycle;
mod log_text;
pub mod message;
pub mod meta;
pub mod method;
mod notifications;
mod page;
mod prompts;
mod raw;
mod resources;
mod result;
mod revision;
mod roots;
mod subscriptions;
mod text;
mod tools;

pub use capabilities::{ClientCapabilities, ServerCapabilities};
pub use completion::{
    CompleteParams, CompleteResult, Completion, CompletionArgument, CompletionContext,
    CompletionReference,
};
pub use content::{Annotations, BinaryContent, ContentBlock, EmbeddedResource, Role, TextContent};
pub use elicitation::{ElicitAction, ElicitMode, ElicitRequestParams, ElicitResult};
pub use encode::{
    encode_error, encode_notification, encode_request, encode_request_with_meta, encode_result,
};
pub use error::Error;
pub use error_object::{ErrorKind, ErrorObject, code};
pub use header::{InvalidAnnotation, ParamHeader, ToolHeaders};
pub use id::RequestId;
pub use implementation::{Icon, Implementation};
pub use lifecycle::{DiscoverParams, DiscoverResult, InitializeParams, InitializeResult};
pub use log_text::{LOG_TEXT_MAX, log_text};
pub use message::{
    Message, Notification, Request, Response, TypedMessage, TypedResponse, decode, decode_as,
    decode_response,
};
pub use meta::{Meta, ModernMeta, RenderedMeta, RequestMeta};
pub use notifications::{
    CancelledParams, ElicitationCompleteParams, LoggingLevel, LoggingMessageParams, ProgressParams,
    ProgressToken, ResourceUpdatedParams, ServerNotification,
};
pub use page::{Cursor, Page, PageItem, PageParams};
pub use prompts::{
    GetPromptParams, GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage,
};
pub use raw::RawJson;
pub use resources::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceParams, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, SubscribeParams,
};
pub use result::{
    CacheScope, EmptyResult, InputRequest, InputRequired, InputResponse, InputResponses, Outcome,
    ResultType,
};
pub use revision::{Era, Revision};
pub use roots::{ListRootsResult, Root};
pub use subscriptions::{AcknowledgedParams, ListenFilter, ListenParams};
pub use tools::{CallToolParams, CallToolResult, ListToolsResult, Tool, ToolAnnotations};
