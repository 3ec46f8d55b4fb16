//! The `#[job]` attribute macro. Use it through `jobq_runtime::job`.

use proc_macro::TokenStream;

/// Turns an `async fn` into a registered jobq job. See `jobq_runtime::job`.
#[proc_macro_attribute]
pub fn job(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
