"""HTTP(S) — the transport every remote file is read over (format-blind).

Not a file format: the rules and limits of reading any remote file (an AEROSET index and its
parts, a single safetensors/GGUF/AERO file behind a URL) by whole GETs and Range requests.
A failure of the transport names this rule set as its format (``http``), one of these rule ids
and the URL of the file (its source), whatever the file is; a tensor over max_tensor_bytes
(HTTP-TENSOR-LIMIT) is a finding in the file: its format, field path and offset.
"""
from __future__ import annotations

from .dsl import RuleId

#: what the audit, the docs and the transport's errors call this rule set
FORMAT = "HTTP"
#: one Range request asks for at most this many bytes (bigger reads are split)
MAX_RANGE_BYTES = 64 * 1024 * 1024
#: reader safety limit: a remote file is at most 128 TiB (a size a server claims is refused above it,
#: before anything is sized from it), so that no claimed size can overflow an offset or a mapping
MAX_FILE_BYTES = 2**47 - 1
#: longest time one request may take, all its attempts and backoffs included (HttpOptions.deadline)
DEADLINE_SECONDS = 60.0
#: the largest tensor fetched unless the caller raises it
MAX_TENSOR_BYTES = 2 * 1024 * 1024 * 1024
#: query parameters (in lower case) that sign a URL for one object -- a presigned URL: S3's
#: (SigV4, V2), Google Cloud Storage's (V4, V2), CloudFront's, Alibaba OSS's, an Azure SAS's
#: ``sig``.  The other files of a model beside such a URL are asked for without its query (it is
#: valid for its own file only); any other query (``?download=true``, a shared token) goes with
#: each of them.  An Azure SAS for a container or a directory (``sr=c``, ``sr=d``) or an account
#: SAS (``srt=``) is valid for every blob it covers: shared, not per object.
SIGNATURE_PARAMS = ("x-amz-signature", "signature", "x-goog-signature", "sig", "x-oss-signature")
#: an Azure SAS (``sig``) with one of these is for more than one blob
SHARED_SAS = (("sr", "c"), ("sr", "d"), ("srt", None))


class Rule(RuleId):
    """Every rule a remote read is checked against."""
    URL = "HTTP-URL", ("a remote file is an http:// or https:// URL with a host, without spaces or control "
                       "characters; a redirect never leaves https")
    REQUEST = "HTTP-REQUEST", ("every request succeeds within the retry budget (connection errors, timeouts, "
                               "stalls and 5xx answers are retried with backoff) and its deadline, within "
                               "max_redirects redirects, with an unencoded body")
    RANGE = "HTTP-RANGE", ("a Range request is answered 206 with exactly the Content-Range asked for, of a "
                           "file of the expected size that does not change while it is read (a 200 is an "
                           "error, never a silent whole-file download)")
    LIMIT = "HTTP-LIMIT", ("a file read whole is at most the size its reader allows (checked before reading); a "
                           "remote file is at most MAX_FILE_BYTES, and the ranges read of it can be held")
    TENSOR_LIMIT = "HTTP-TENSOR-LIMIT", "a tensor read remotely is at most max_tensor_bytes (MAX_TENSOR_BYTES)"


RECORDS = ()
PAYLOADS = ()
