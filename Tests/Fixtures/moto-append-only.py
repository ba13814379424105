"""A moto S3 server that checks every request against IAM policies, as AWS does, for the
repository tests: two users, `owner`, whose key may do anything with the bucket, and
`appender`, whose key may list, read and write but delete only under PREFIX/locks/ (an
append-only key, as restic's rest-server --append-only allows).

    python moto-append-only.py BUCKET PREFIX

Prints one line of JSON, {"endpoint": …, "keys": {"owner": {"id", "secret"}, "appender": …}},
then serves on 127.0.0.1 until its standard input closes (its parent went). moto is from PyPI
(moto[server]); its server answers /moto-api/reset-auth, which lets the first N requests
through unchecked: exactly those that make the bucket, the users, their policies and keys.
One defect of moto's signature check is mended below, in the specification's direction.
"""

import json
import socket
import sys

from urllib.parse import quote, unquote, urlsplit, urlunsplit

import boto3
import requests
from moto.iam import access_control
from moto.server import ThreadedMotoServer

# moto 5.2.1 checks a signature against the query string as the request carried it, where
# Signature Version 4 encodes every name and value (a prefix's "/" as %2F), so a listing under
# a prefix fails for every client, boto3 included. Its check, made to encode them as the
# specification says (and nothing else changed):
_unchanged = access_control.IAMRequestBase._create_aws_request


def _canonical_query(self):  # type: ignore[no-untyped-def]
    request = _unchanged(self)
    parts = urlsplit(request.url)
    if parts.query:
        pairs = []
        for pair in parts.query.split("&"):
            name, _, value = pair.partition("=")
            pairs.append(quote(unquote(name), safe="-_.~") + "=" + quote(unquote(value), safe="-_.~"))
        request.url = urlunsplit(parts._replace(query="&".join(pairs)))
    return request


access_control.IAMRequestBase._create_aws_request = _canonical_query


def main() -> None:
    bucket, prefix = sys.argv[1], sys.argv[2].strip("/")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    whole = [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]
    policies = {
        "owner": [{"Effect": "Allow", "Action": "s3:*", "Resource": whole}],
        "appender": [
            {
                "Effect": "Allow",
                "Action": [
                    "s3:ListBucket",
                    "s3:ListBucketMultipartUploads",
                    "s3:ListMultipartUploadParts",
                    "s3:GetObject",
                    "s3:PutObject",
                ],
                "Resource": whole,
            },
            {"Effect": "Allow", "Action": "s3:DeleteObject", "Resource": f"arn:aws:s3:::{bucket}/{prefix}/locks/*"},
        ],
    }
    # The bucket, then a user, a policy and a key for each: the requests let through unchecked.
    unchecked = 1 + 3 * len(policies)
    requests.post(f"{endpoint}/moto-api/reset-auth", data=str(unchecked).encode(), timeout=10)
    session = boto3.session.Session(
        aws_access_key_id="setup", aws_secret_access_key="setup", region_name="us-east-1")
    session.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    iam = session.client("iam", endpoint_url=endpoint)
    keys = {}
    for user, statements in policies.items():
        iam.create_user(UserName=user)
        iam.put_user_policy(
            UserName=user,
            PolicyName="repository",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": statements}),
        )
        key = iam.create_access_key(UserName=user)["AccessKey"]
        keys[user] = {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    print(json.dumps({"endpoint": endpoint, "keys": keys}), flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
