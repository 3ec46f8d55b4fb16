use jobq_runtime::job;

struct Image {
    bytes: Vec<u8>,
}

#[job]
async fn thumbnail(image: Image, size: u32) {
    let _ = (image.bytes, size);
}

fn main() {}
