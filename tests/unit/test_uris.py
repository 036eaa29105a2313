"""gs:// URIs, bucket and object names: every GCS naming rule and our path-safety rules."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.uris import GcsUri, parse_gcs_uri, validate_bucket_name, validate_object_name


@pytest.mark.parametrize(
    ("uri", "bucket", "name"),
    [
        ("gs://my-bucket", "my-bucket", ""),
        ("gs://my-bucket/", "my-bucket", ""),
        ("gs://my_bucket.example.com/a/b.tar.gz", "my_bucket.example.com", "a/b.tar.gz"),
        ("gs://b12/staging/", "b12", "staging/"),
        ("gs://abc/dir/file with spaces#1?.whl", "abc", "dir/file with spaces#1?.whl"),
    ],
)
def test_parse_valid(uri: str, bucket: str, name: str) -> None:
    parsed = parse_gcs_uri(uri)
    assert (parsed.bucket, parsed.name) == (bucket, name)
    assert parsed.uri == (uri if name else uri.rstrip("/"))


@pytest.mark.parametrize(
    ("uri", "rule"),
    [
        ("s3://bucket/x", "gs:// URI"),
        ("/local/path", "gs:// URI"),
        ("GS://bucket/x", "gs:// URI"),
        ("gs://", "non-empty"),
        ("gs:///x", "non-empty"),
        ("gs://Bucket/x", "lowercase"),
        ("gs://my bucket/x", "lowercase"),
        ("gs://ab/x", "3-63"),
        ("gs://" + "a" * 64, "3-63"),
        ("gs://" + ("a" * 64 + ".") * 3 + "a", "1-63"),
        ("gs://" + "a." * 111 + "a", "3-63"),
        ("gs://-bucket", "start and end"),
        ("gs://bucket-", "start and end"),
        ("gs://a..b", "1-63"),
        ("gs://192.168.1.1/x", "IP address"),
        ("gs://goog-bucket", "goog"),
        ("gs://my-google-data", "google"),
        ("gs://my-g00gle-data", "google"),
        ("gs://b12//abs", "absolute"),
        ("gs://b12/a/../b", "'..'"),
        ("gs://b12/..", "'..'"),
        ("gs://b12/a/./b", "'.'"),
        ("gs://b12/a//b", "empty segments"),
        ("gs://b12/a\x00b", "NUL"),
        ("gs://b12/a\nb", "line feed"),
        ("gs://b12/a\rb", "carriage return"),
        ("gs://b12/" + "é" * 513, "1024 bytes"),
        ("gs://b12/.well-known/acme-challenge/x", "acme"),
    ],
)
def test_parse_rejects_with_field_and_rule(uri: str, rule: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_gcs_uri(uri, "staging_uri")
    assert err.value.field == "staging_uri"
    assert rule in err.value.rule


def test_non_string_is_rejected() -> None:
    with pytest.raises(ValidationError, match="gs:// URI"):
        parse_gcs_uri(None, "x")  # type: ignore[arg-type]


def test_require_object_rejects_bare_bucket() -> None:
    with pytest.raises(ValidationError, match="name an object"):
        parse_gcs_uri("gs://bucket/", "uri", require_object=True)
    assert parse_gcs_uri("gs://bucket/o", require_object=True).name == "o"


def test_longest_legal_names_pass() -> None:
    assert validate_bucket_name("a" * 63) == "a" * 63
    dotted = ".".join(["a" * 63] * 3) + "." + "a" * 30
    assert len(dotted) == 222
    assert validate_bucket_name(dotted) == dotted
    assert validate_object_name("x" * 1024) == "x" * 1024
    assert validate_object_name("dir/") == "dir/"


def test_join_builds_and_validates() -> None:
    base = parse_gcs_uri("gs://bucket/staging/")
    joined = base.join("abc123", "trainer-0.1.tar.gz")
    assert joined == GcsUri("bucket", "staging/abc123/trainer-0.1.tar.gz")
    assert joined.uri == "gs://bucket/staging/abc123/trainer-0.1.tar.gz"
    assert str(GcsUri("bucket").join("x")) == "gs://bucket/x"
    with pytest.raises(ValidationError) as err:
        base.join("..", "etc", field="packages[0]")
    assert err.value.field == "packages[0]"


def test_object_name_validator_names_field() -> None:
    with pytest.raises(ValidationError) as err:
        validate_object_name("", "model_uri")
    assert err.value.field == "model_uri"
