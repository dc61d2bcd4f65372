// The reader worker's script (dist/models-reader.mjs): reads Blob ranges for the thread that
// started it (source.js, readerWorker).
import { serveBlobRanges } from './blob_range.js';

serveBlobRanges(self);
