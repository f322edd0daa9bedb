/**
 * The configuration's shared field shapes: names, secret names, key hashes (src/config/schema.ts).
 */
import { z } from "zod";

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
export const SHA256_HEX = /^[0-9a-f]{64}$/;
/** A region, tenant or namespace name: lowercase letters, digits and dashes, at most 63 characters. */
export const name = () => z.string().regex(NAME, "must be lowercase letters, digits and dashes");
/** The name of a Worker secret (a binding name). */
export const secretName = () => z.string().regex(SECRET_NAME, "must be an UPPER_SNAKE_CASE binding name");
