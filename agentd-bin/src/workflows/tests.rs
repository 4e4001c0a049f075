//! The engine over the store and the reference server.
