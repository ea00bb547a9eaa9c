-- A digest of each policy's content, kept by a trigger on every write path (create, edit, revision release,
-- import), so the policy stream can tell whether the content it has encoded is still current without reading
-- the content itself: a 1 MiB policy used to be read and decoded for every snapshot built (issue 21). A
-- trigger rather than a generated column: the UTF-8 conversion is not an immutable expression.

ALTER TABLE policies ADD COLUMN content_sha256 bytea;

CREATE FUNCTION policies_content_digest() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.content_sha256 := sha256(convert_to(NEW.content, 'UTF8'));
  RETURN NEW;
END
$$;

CREATE TRIGGER policies_content_digest BEFORE INSERT OR UPDATE OF content ON policies
  FOR EACH ROW EXECUTE FUNCTION policies_content_digest();

UPDATE policies SET content_sha256 = sha256(convert_to(content, 'UTF8'));
ALTER TABLE policies ALTER COLUMN content_sha256 SET NOT NULL;
