//! The `#[job]` attribute macro of jobq. Use it through `jobq_runtime::job`.

mod expand;
mod parse;

use proc_macro::TokenStream;

/// Turns an `async fn` into a registered jobq job. See `jobq_runtime::job`.
#[proc_macro_attribute]
pub fn job(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    expand::expand(args.into(), item.clone())
        .unwrap_or_else(|error| expand::token_stream_with_error(item, error))
        .into()
}
