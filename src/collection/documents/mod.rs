//! Readers of whole documents (HTML pages) that convrag cuts into passages itself.

pub mod html;
