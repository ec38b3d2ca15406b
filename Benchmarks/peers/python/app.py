"""A RISC receiver in the shape of Google's Python sample: Flask + PyJWT, keys held in memory,
events kept in memory only. Issue 30's peer for `risc bench serve --compare`; not part of risc.

Run: gunicorn -w 2 --preload -b 127.0.0.1:18443 app:app (from this folder), with RISC_PEER_JWKS,
RISC_PEER_AUD and RISC_PEER_ISS naming the JWK Set file, the audience and the issuer.
GET /stats answers {"stored": N}: SETs kept, counted across the workers.
"""
import json
import multiprocessing
import os

import jwt
from flask import Flask, jsonify, request

with open(os.environ.get("RISC_PEER_JWKS", "../../../keys/test/jwks.json")) as f:
    KEYS = {k["kid"]: jwt.PyJWK(k).key for k in json.load(f)["keys"] if k.get("kty") == "RSA"}
AUDIENCE = os.environ.get("RISC_PEER_AUD", "risc-test-client.apps.googleusercontent.com")
ISSUER = os.environ.get("RISC_PEER_ISS", "https://accounts.google.com/")
STORED = multiprocessing.Value("q", 0)  # shared by the workers (gunicorn --preload forks after this)

app = Flask(__name__)


def refuse(code, description):
    return jsonify(err=code, description=description), 400


@app.post("/events")
def events():
    token = request.get_data(as_text=True)
    try:
        kid = jwt.get_unverified_header(token).get("kid")
        key = KEYS.get(kid)
        if key is None:
            return refuse("invalid_key", "unknown kid")
        claims = jwt.decode(token, key, algorithms=["RS256"], audience=AUDIENCE, issuer=ISSUER, options={"verify_exp": False})
    except jwt.InvalidAudienceError:
        return refuse("invalid_audience", "wrong aud")
    except jwt.InvalidIssuerError:
        return refuse("invalid_issuer", "wrong iss")
    except jwt.PyJWTError:
        return refuse("invalid_request", "not a valid SET")
    if not claims.get("jti") or not isinstance(claims.get("events"), dict):
        return refuse("invalid_request", "no events or jti")
    with STORED.get_lock():
        STORED.value += 1
    return "", 202


@app.get("/stats")
def stats():
    return jsonify(stored=STORED.value)
