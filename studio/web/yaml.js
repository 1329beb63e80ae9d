// YAML recipes in the page: js-yaml (Debian's node-js-yaml, its browser build served by the studio
// at /static/js-yaml.min.js), loaded the first time a recipe is imported or exported.

let loading = null;

function lib() {
  if (window.jsyaml) return Promise.resolve(window.jsyaml);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = '/static/js-yaml.min.js';
      s.onload = () => (window.jsyaml ? resolve(window.jsyaml) : reject(new Error('/static/js-yaml.min.js did not define jsyaml')));
      s.onerror = () => { loading = null; reject(new Error('cannot load /static/js-yaml.min.js (the YAML reader)')); };
      document.head.append(s);
    });
  }
  return loading;
}

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
