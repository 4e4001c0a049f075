//! agentd's own tools: the catalogue, grants, argument schemas and implementations.
//!
//! This crate is not implemented yet and exports nothing.
