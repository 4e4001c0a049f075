//! JSON-RPC 2.0 framing and the MCP message types of every revision, from 2024-11-05 to
//! 2026-07-28.
//!
//! This crate is the vocabulary of an MCP client: it reads and writes messages and knows
//! what they mean, and does no IO. It depends on serde, serde_json and base64 only.
//!
//! - [`decode`] reads one message from bytes, bounded by a size limit, borrowing `params`
//!   and `result` as raw JSON; [`decode_response`] reads a response straight into its
//!   result type. Every malformed input gets its own [`Error`] variant.
//! - [`encode_request`], [`encode_notification`], [`encode_result`] and [`encode_error`]
//!   write a message in one pass into a caller's buffer.
//! - [`Revision`] names the revisions and their [`Era`]; [`ErrorObject::kind`] gives the
//!   error codes a client acts on a type ([`ErrorKind`]).
//! - The MCP types of both eras: `initialize` and `server/discover`, capabilities, tools,
//!   resources, prompts, completion, elicitation, `input_required` results, listens,
//!   notifications, pagination, and the `_meta` keys ([`meta`]).
//! - [`ToolHeaders`] validates `x-mcp-header` annotations and derives `Mcp-Param-*`
//!   headers; [`header::encode_value`] is the `=?base64?…?=` rule they share with `Mcp-Name`.
//! - [`log_text`] makes server text safe for a log line.
//!
//! Values a peer may extend (`_meta`, capabilities, tool and elicitation schemas) are kept
//! whole and encode back unchanged.
//!
//! # Batches
//!
//! JSON-RPC batches (arrays) were part of MCP only in 2025-03-26. This crate refuses one with
//! [`Error::Batch`], in requests and in responses alike: a client never sends a batch, so no
//! server may answer with one.
//!
//! # Example
//!
//! ```
//! use mcp_wire::{decode, encode_request, CallToolParams, CallToolResult, Message, Outcome, RequestId};
//!
//! let mut out = Vec::new();
//! let params = CallToolParams::new("add");
//! encode_request(&mut out, &RequestId::Number(2), "tools/call", Some(&params)).unwrap();
//!
//! let answer = br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"5"}],"isError":false}}"#;
//! let Message::Response(response) = decode(answer, 1 << 20).unwrap() else { panic!() };
//! let Ok(Outcome::Complete(result)) = response.result_as::<Outcome<CallToolResult>>().unwrap() else { panic!() };
//! assert_eq!(result.content[0].as_text(), Some("5"));
//! assert!(!result.is_error());
//! ```

mod capabilities;
mod completion;
mod content;
mod elicitation;
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
mod tools;

pub use capabilities::{ClientCapabilities, ServerCapabilities};
pub use completion::{
    CompleteParams, CompleteResult, Completion, CompletionArgument, CompletionContext,
    CompletionReference,
};
pub use content::{Annotations, BinaryContent, ContentBlock, EmbeddedResource, Role, TextContent};
pub use elicitation::{ElicitAction, ElicitMode, ElicitRequestParams, ElicitResult};
pub use error::Error;
pub use error_object::{ErrorKind, ErrorObject, code};
pub use header::{InvalidAnnotation, ParamHeader, ToolHeaders};
pub use id::RequestId;
pub use implementation::{Icon, Implementation};
pub use lifecycle::{DiscoverParams, DiscoverResult, InitializeParams, InitializeResult};
pub use log_text::{LOG_TEXT_MAX, log_text};
pub use message::{
    Message, Notification, Request, Response, TypedMessage, TypedResponse, decode, decode_as,
    decode_response, encode_error, encode_notification, encode_request, encode_result,
};
pub use meta::{Meta, ModernMeta, RenderedMeta, RequestMeta, WithMeta};
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

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
