// YAML recipes in the page: js-yaml (Debian's node-js-yaml, its browser build served by the studio
// at /static/js-yaml.min.js), loaded the first time a recipe is imported or exported.
import { loadScript } from './dom.js';

const lib = () => loadScript('/static/js-yaml.min.js', 'jsyaml');

export async function parseRecipe(text, name) {
  const yaml = await lib();
  let doc;
  try {
    doc = yaml.load(text, { filename: name, schema: yaml.CORE_SCHEMA });
  } catch (e) {
    throw new Error(`${name}: ${e.reason || e.message}${e.mark ? ` (line ${e.mark.line + 1})` : ''}`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`${name}: a recipe is a mapping of keys to values`);
  return doc;
}

export async function dumpRecipe(obj) {
  const yaml = await lib();
  return yaml.dump(obj, { lineWidth: 100, noRefs: true });
}
